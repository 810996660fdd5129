/*
 * output.h - what the commands share when they print: the `--json FILE|-` writer (one JSON
 * object per run, "-" meaning stdout) and integer flag parsing with a message that names the
 * command, the flag and the allowed range.
 */
#ifndef INAGG_CLI_OUTPUT_H
#define INAGG_CLI_OUTPUT_H

#include <stdint.h>

#include "common/json.h"

/* Write w's object to path ("-": stdout) and free w. 0, or -1 after a message naming cmd. */
int cli_emit_json(json_writer_t *w, const char *path, const char *cmd);

/* Parse an unsigned integer in lo..hi. 0, or -1 after a message naming cmd and flag. */
int cli_parse_u64(const char *cmd, const char *flag, const char *text, uint64_t lo, uint64_t hi,
                  uint64_t *out);

#endif /* INAGG_CLI_OUTPUT_H */
