/*
 * test_promtext.c - the Prometheus text writer (json/promtext.c): label values escaped as the
 * exposition format requires (backslash, double quote, newline), HELP text escaped, a label
 * set cut short by its buffer still a string, samples with and without labels.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "lib/json/promtext.h"

static char *render(void (*fn)(FILE *))
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    fn(m);
    fclose(m);
    return text;
}

static void family_and_samples(FILE *out)
{
    char l[128];
    prom_family(out, "x_total", "counter", "a \\ b\nc");
    prom_labels(l, sizeof(l), "job_name", "a\"b\\c\nd", "reason", "bad_slot", NULL);
    prom_u64(out, "x_total", l, 18446744073709551615ull);
    prom_u64(out, "x_total", NULL, 0);
    prom_double(out, "x_total", "", 1.5e-9);
}

TEST(promtext_escapes_and_formats, 5)
{
    char *t = render(family_and_samples);
    const char *want = "# HELP x_total a \\\\ b\\nc\n# TYPE x_total counter\n"
                       "x_total{job_name=\"a\\\"b\\\\c\\nd\",reason=\"bad_slot\"} "
                       "18446744073709551615\nx_total 0\nx_total 1.5e-09\n";
    CHECK_MSG(t && strcmp(t, want) == 0, "got:\n%s", t ? t : "(null)");
    free(t);
}

TEST(promtext_labels_cut_short_stay_strings, 5)
{
    char l[16];
    memset(l, 'X', sizeof(l));
    prom_labels(l, sizeof(l), "job_name", "a-very-long-job-name", NULL);
    CHECK(memchr(l, 0, sizeof(l)) != NULL);
    prom_labels(l, sizeof(l), NULL);
    CHECK(l[0] == 0);
}
