/*
 * output.h - a command's `--json FILE|-` writer: one JSON object per run, "-" meaning stdout.
 */
#ifndef INAGG_CLI_OUTPUT_H
#define INAGG_CLI_OUTPUT_H

#include "json/json.h"

/* Write w's object to path ("-": stdout) and free w. 0, or a negative errno after a message
 * naming cmd. */
int cli_emit_json(json_writer_t *w, const char *path, const char *cmd);

#endif /* INAGG_CLI_OUTPUT_H */
