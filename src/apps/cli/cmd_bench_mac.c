/*
 * cmd_bench_mac.c - `inagg bench mac`: what the authenticated dataplane's per-packet MACs
 * cost one core of this machine (bench/bench_mac.h), per payload size, against libsodium's
 * tag, every size verified.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "apps/bench/bench_mac.h"
#include "apps/cli/bench_opts.h"
#include "apps/cli/commands.h"
#include "apps/cli/flags.h"
#include "apps/cli/output.h"
#include "lib/json/json.h"

#define CMD "inagg bench mac"
#define DEFAULT_SIZES "32,96,1024,8192"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: inagg bench mac [--sizes LIST] [--count N] [--repeats R] [--json FILE|-]\n"
            "\n"
            "What the authenticated dataplane costs one core of this machine. A job with a\n"
            "secret (every job inagg bench and inagg train start) seals every packet with a\n"
            "Poly1305 tag under a ChaCha20 one-time key (PROTOCOL.md 1.4): each worker seals\n"
            "its contributions and checks its results, the switch checks every contribution\n"
            "and seals each round's result once. Per payload size this times, in one thread:\n"
            "  seal ns     dpauth's seal: a new nonce, the one-time key and the tag (Poly1305\n"
            "              from OpenSSL's libcrypto above 256 bytes where it offers it, else\n"
            "              from libsodium: the 'poly1305' column)\n"
            "  check ns    dpauth's check of a sealed packet\n"
            "  sodium ns   the same tag by libsodium alone (the baseline; no new nonce)\n"
            "  speedup     sodium ns / seal ns\n"
            "  GB/s        payload bytes sealed per second by one core\n"
            "Every size is verified: the sealed tag equals libsodium's, the check accepts\n"
            "it, every timed check passed, and the packet with one bit flipped is refused.\n"
            "\n"
            "Where the CPU binds (every process of a job on a few cores), an allreduce of S\n"
            "bytes by N workers seals or checks each byte 3N + 1 times in all (PERFORMANCE.md\n"
            "\"Authenticated dataplane\"); INAGG_NO_DATAPLANE_AUTH=1 (bench allreduce\n"
            "--no-dataplane-auth) measures the same job without them.\n"
            "\n"
            "options:\n"
            "  --sizes LIST   payload bytes per packet, comma-separated, 0..%u, up to %u\n"
            "                 sizes (default %s: a p4sgd micro-batch, a small\n"
            "                 packet, 1 KiB, and the 8 KiB aggregation packet at MTU 9000)\n"
            "  --count N      tags per timed loop, 1..%u (default 20000)\n"
            "  --repeats R    timed loops per operation, interleaved; medians reported,\n"
            "                 1..%u (default 5)\n"
            "  --json FILE|-  also write one JSON object to FILE; '-' prints only the JSON\n"
            "                 on stdout\n"
            "\n"
            "Exit: 0 every size verified, 1 one was not (or an error), 2 bad usage.\n",
            BENCH_MAC_MAX_PAYLOAD, BENCH_MAC_MAX_SIZES, DEFAULT_SIZES, BENCH_MAC_MAX_COUNT,
            BENCH_MAC_MAX_REPEATS);
}

typedef struct mac_cli {
    bench_mac_opts_t o;
    const char *json;
} mac_cli_t;

/* The command's own flags (bench_own_flag_fn). */
static int parse_own_flag(void *ctx, int c)
{
    mac_cli_t *m = ctx;
    char why[160];
    switch (c) {
        case 's':
            if (bench_mac_parse_sizes(optarg, m->o.sizes, &m->o.nsizes, why, sizeof(why)) != 0) {
                fprintf(stderr, CMD ": --sizes: %s (see --help)\n", why);
                return 2;
            }
            return 0;
        case 'c':
            return cli_parse_u32(CMD, "--count", optarg, 1, BENCH_MAC_MAX_COUNT, &m->o.count) ? 2
                                                                                              : 0;
        case 'r':
            return cli_parse_u32(CMD, "--repeats", optarg, 1, BENCH_MAC_MAX_REPEATS, &m->o.repeats)
                       ? 2
                       : 0;
        default: return -1;
    }
}

/* 0 parsed, 1 help printed, 2 bad usage (said on stderr). */
static int parse_args(int argc, char **argv, mac_cli_t *m)
{
    static const struct option own[] = {{"sizes", required_argument, NULL, 's'},
                                        {"count", required_argument, NULL, 'c'},
                                        {"repeats", required_argument, NULL, 'r'},
                                        {NULL, 0, NULL, 0}};
    *m = (mac_cli_t){.o = {.count = 20000, .repeats = 5}};
    (void)bench_mac_parse_sizes(DEFAULT_SIZES, m->o.sizes, &m->o.nsizes, NULL, 0);
    bench_opts_t b = {.cmd = CMD, .json_path = &m->json};
    return bench_opts_parse(&b, argc, argv, own, parse_own_flag, m, usage);
}

static double gbytes_per_s(const bench_mac_row_t *r)
{
    return r->seal_ns > 0 ? (double)r->size / r->seal_ns : 0.0;
}

/* libsodium's time per tag over the product's seal. */
static double speedup(const bench_mac_row_t *r)
{
    return r->seal_ns > 0 ? r->sodium_ns / r->seal_ns : 0.0;
}

static void render_table(const mac_cli_t *m, const bench_mac_row_t *rows)
{
    printf(CMD ": %u tags x %u repeats per operation, one thread, medians\n\n", m->o.count,
           m->o.repeats);
    printf("%10s %10s %10s %10s %8s %8s %10s %9s\n", "payload B", "seal ns", "check ns",
           "sodium ns", "speedup", "GB/s", "poly1305", "verified");
    for (uint32_t k = 0; k < m->o.nsizes; k++) {
        const bench_mac_row_t *r = &rows[k];
        printf("%10u %10.1f %10.1f %10.1f %7.2fx %8.2f %10s %9s\n", r->size, r->seal_ns,
               r->check_ns, r->sodium_ns, speedup(r), gbytes_per_s(r), r->library,
               r->verified ? "yes" : "NO");
    }
}

static int render_json(const mac_cli_t *m, const bench_mac_row_t *rows, int verified)
{
    json_writer_t w;
    json_init(&w);
    json_begin_object(&w, NULL);
    json_int(&w, "count", m->o.count);
    json_int(&w, "repeats", m->o.repeats);
    json_bool(&w, "verified", verified);
    json_begin_array(&w, "sizes");
    for (uint32_t k = 0; k < m->o.nsizes; k++) {
        const bench_mac_row_t *r = &rows[k];
        json_begin_object(&w, NULL);
        json_int(&w, "payload_bytes", r->size);
        json_number(&w, "seal_ns", r->seal_ns);
        json_number(&w, "check_ns", r->check_ns);
        json_number(&w, "sodium_ns", r->sodium_ns);
        json_number(&w, "speedup", speedup(r));
        json_number(&w, "seal_gbytes_per_s", gbytes_per_s(r));
        json_string(&w, "poly1305", r->library);
        json_bool(&w, "verified", r->verified);
        json_end_object(&w);
    }
    json_end_array(&w);
    json_end_object(&w);
    return cli_emit_json(&w, m->json, CMD);
}

int cmd_bench_mac(int argc, char **argv)
{
    mac_cli_t m;
    int prc = parse_args(argc, argv, &m);
    if (prc != 0)
        return prc == 1 ? 0 : prc;
    bench_mac_row_t rows[BENCH_MAC_MAX_SIZES];
    char err[256];
    if (bench_mac_measure(&m.o, rows, err, sizeof(err)) != 0) {
        fprintf(stderr, CMD ": %s\n", err);
        return 1;
    }
    int verified = 1;
    for (uint32_t k = 0; k < m.o.nsizes; k++)
        verified &= rows[k].verified;
    if (!(m.json && strcmp(m.json, "-") == 0))
        render_table(&m, rows);
    if (m.json && render_json(&m, rows, verified) != 0)
        return 1;
    if (!verified)
        fprintf(stderr, CMD ": a size did not verify: its tag is not the reference's, or the "
                            "check accepted a forged packet\n");
    return verified ? 0 : 1;
}
