/*
 * output.h - a command's `--json FILE|-` writer: one JSON object per run, "-" meaning stdout.
 */
#ifndef INAGG_CLI_OUTPUT_H
#define INAGG_CLI_OUTPUT_H

#include <stdio.h>

#include "lib/json/json.h"

/* Write w's object to path ("-": stdout) and free w. 0, or a negative errno after a message
 * naming cmd. */
int cli_emit_json(json_writer_t *w, const char *path, const char *cmd);

/* Where a command's text table goes: stderr when its JSON goes to stdout (json_path "-"), so
 * that stdout stays one JSON object; else stdout. */
FILE *cli_text_stream(const char *json_path);

/* Begin the "testbed" object of a run on `hosts` testbed hosts with the fields every bench
 * shares (the fabric, link delay and rate as given, or their defaults' names); the caller
 * adds its own and ends the object. */
void cli_json_testbed_begin(json_writer_t *w, uint32_t hosts, const char *fabric,
                            const char *link_delay, const char *link_rate);

#endif /* INAGG_CLI_OUTPUT_H */
