/*
 * xdpload.c - the fabric's XDP program on one interface (see xdpload.h): open the embedded
 * object, load it, fill its config map; attach it through a bpf_link in driver mode.
 */
#include "switchd/fabric/xdpload.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/if_link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/errmsg.h"
#include "switchd/fabric/xdpblob.h"

/* libbpf prints its own diagnostics to stderr by default; ours name the cause instead. */
static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    (void)level;
    (void)fmt;
    (void)ap;
    return 0;
}

int xdpload_load(xdpload_t *x, const char *ifname, const struct steer_conf *conf, char *err,
                 size_t errlen)
{
    memset(x, 0, sizeof(*x));
    x->prog_fd = x->link_fd = x->xsks_fd = x->stats_fd = -1;
    libbpf_set_print(quiet);
    size_t len = 0;
    const void *blob = xdpblob_steer(&len);
    LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = "inagg_steer");
    x->obj = bpf_object__open_mem(blob, len, &oo);
    if (!x->obj) {
        int e = errno ? errno : EINVAL;
        x->obj = NULL;
        return set_err(err, errlen, -e, "no XDP support on %s: opening the program: %s", ifname,
                       strerror(e));
    }
    struct bpf_map *cm = bpf_object__find_map_by_name(x->obj, "conf");
    struct bpf_program *prog = bpf_object__find_program_by_name(x->obj, "inagg_steer");
    if (!cm || !prog) {
        xdpload_detach(x);
        return set_err(err, errlen, -ENOENT, "no XDP support on %s: the program is incomplete",
                       ifname);
    }
    bpf_program__set_ifindex(prog, 0);
    int rc = bpf_object__load(x->obj);
    if (rc < 0) {
        xdpload_detach(x);
        return set_err(err, errlen, rc, "no XDP support on %s: loading the program: %s", ifname,
                       strerror(-rc));
    }
    uint32_t zero = 0;
    if (bpf_map_update_elem(bpf_map__fd(cm), &zero, conf, 0) != 0) {
        int e = errno;
        xdpload_detach(x);
        return set_err(err, errlen, -e, "no XDP support on %s: configuring the program: %s", ifname,
                       strerror(e));
    }
    x->xsks_fd = bpf_object__find_map_fd_by_name(x->obj, "xsks");
    x->stats_fd = bpf_object__find_map_fd_by_name(x->obj, "stats");
    x->prog_fd = bpf_program__fd(prog);
    return 0;
}

int xdpload_attach(xdpload_t *x, const char *ifname, int ifindex, char *err, size_t errlen)
{
    LIBBPF_OPTS(bpf_link_create_opts, lo, .flags = XDP_FLAGS_DRV_MODE);
    x->link_fd = bpf_link_create(x->prog_fd, ifindex, BPF_XDP, &lo);
    if (x->link_fd < 0) {
        int e = errno;
        x->link_fd = -1;
        xdpload_detach(x);
        return set_err(err, errlen, -e, "no XDP support on %s: %s%s", ifname, strerror(e),
                       e == EBUSY ? " (another XDP program is attached)" : "");
    }
    return 0;
}

uint64_t xdpload_stat(const xdpload_t *x, enum steer_stat which)
{
    if (x->stats_fd < 0)
        return 0;
    int ncpu = libbpf_num_possible_cpus();
    if (ncpu <= 0 || ncpu > 4096)
        return 0;
    uint64_t *v = calloc((size_t)ncpu, sizeof(*v)), sum = 0;
    uint32_t key = (uint32_t)which;
    if (v && bpf_map_lookup_elem(x->stats_fd, &key, v) == 0)
        for (int i = 0; i < ncpu; i++)
            sum += v[i];
    free(v);
    return sum;
}

void xdpload_detach(xdpload_t *x)
{
    if (x->link_fd >= 0)
        close(x->link_fd);
    x->link_fd = -1;
    if (x->obj)
        bpf_object__close(x->obj); /* closes the maps' descriptors too */
    x->obj = NULL;
    x->prog_fd = x->xsks_fd = x->stats_fd = -1;
}
