/*
 * sml_engine.h - one switchml engine (proto_switchml.c): SwitchML's streaming engine for one
 * engine thread's share of the slots, as sml_ring.c drives it.
 */
#ifndef INAGG_WORKER_SML_ENGINE_H
#define INAGG_WORKER_SML_ENGINE_H

#include "inagg.h"
#include "lib/worker/proto.h"

typedef struct engine engine_t;

/* Engine `index` of p->threads: its endpoint, slots and (compressed jobs) codec and encoder
 * helper. 0, or -errno with err set. */
int sml_engine_create(const worker_params_t *p, uint32_t index, engine_t **out, char *err,
                      size_t errlen);
void sml_engine_destroy(engine_t *e);

/* Runs this engine's share of one allreduce: 0, or -errno (proto.h) with detail set. */
int sml_engine_run(engine_t *e, const worker_call_t *r, char *detail, size_t dlen);

/* Adds the engine's counters to acc; the codec's (with its helper's) too, returning whether
 * the engine codes at all. */
void sml_engine_add_stats(const engine_t *e, inagg_stats_t *acc);
int sml_engine_add_codec_stats(const engine_t *e, inagg_codec_stats_t *acc);
void sml_engine_add_transport_stats(const engine_t *e, inagg_transport_stats_t *acc);

#endif
