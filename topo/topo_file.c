/*
 * Topology files (format in xccl_topo.h): dump what was detected, load one
 * instead of detecting.  Dump writes every stored field in a fixed order and
 * load accepts exactly what dump writes (and the same lines in any order of
 * keys), so dump -> load -> dump is byte-identical.  Errors carry the line
 * number; a bad file never leaves a half-read topology in use.
 */
#include "xccl_topo.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_MAX_LEN 1024
#define MAX_TOKENS 16

/* ------------------------------------------------------------ dump */

static const char *or_dash(const char *s)
{
    return s[0] ? s : "-";
}

static void dump_loc(const xccl_topo_loc_t *loc, FILE *out)
{
    fprintf(out, " pci=%s numa=%d package=%d pcie=%s", or_dash(loc->pci), loc->numa,
            loc->package, or_dash(loc->pcie));
}

int xccl_topo_dump(const xccl_topo_t *topo, FILE *out)
{
    char summary[256];
    xccl_topo_summary(topo, summary, sizeof(summary));
    fprintf(out, "# xccl topology file (derived, not read back: %s)\n", summary);
    fprintf(out, "xccl_topo 1\n");
    fprintf(out, "node %s packages=%d numa=%d cores=%d pus=%d\n", topo->name, topo->packages,
            topo->numa_nodes, topo->cores, topo->pus);
    for (int i = 0; i < topo->nnuma; i++) {
        const xccl_topo_numa_t *m = &topo->numa[i];
        fprintf(out, "numa %d package=%d cores=%d pus=%d\n", m->os_index, m->package, m->cores, m->pus);
    }
    for (int i = 0; i < topo->ndevs; i++) {
        const xccl_topo_dev_t *d = &topo->devs[i];
        fprintf(out, "device %s kind=%s vendor=%04x", d->name, xccl_topo_dev_kind_name(d->kind), d->vendor);
        dump_loc(&d->loc, out);
        fputc('\n', out);
    }
    for (int i = 0; i < topo->nnics; i++) {
        const xccl_topo_nic_t *n = &topo->nics[i];
        fprintf(out, "nic %s type=%s ports=%d rate=%g", n->name, xccl_topo_nic_type_name(n->type),
                n->ports, n->rate_gbps);
        dump_loc(&n->loc, out);
        fputc('\n', out);
    }
    for (int i = 0; i < topo->ndevs; i++) {
        for (int j = i + 1; j < topo->ndevs; j++) {
            const xccl_topo_link_t *l = &topo->links[i][j];
            if (l->count > 0) {
                fprintf(out, "link %s %s %s %d\n", topo->devs[i].name, topo->devs[j].name,
                        xccl_topo_link_type_name((xccl_topo_link_type_t) l->type), l->count);
            }
        }
    }
    for (int i = 0; i < topo->ndevs; i++) {
        if (topo->devs[i].switch_links > 0) {
            fprintf(out, "link %s nvswitch %s %d\n", topo->devs[i].name,
                    xccl_topo_link_type_name(topo->switch_link_type), topo->devs[i].switch_links);
        }
    }
    for (int i = 0; i < topo->ndevs; i++) {
        int n = topo->devs[i].nic;
        fprintf(out, "# rail %s %s", topo->devs[i].name, n >= 0 ? topo->nics[n].name : "-");
        if (n >= 0) {
            fprintf(out, " %s", xccl_topo_path_name(xccl_topo_path(topo, i, topo->ndevs + n)));
        }
        fputc('\n', out);
    }
    return ferror(out) ? -1 : 0;
}

/* ------------------------------------------------------------ load */

typedef struct {
    const char *what;
    int line;
    char *err;
    size_t errlen;
} parser_t;

static int fail(parser_t *p, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(p->err, p->errlen, "%s:%d: %s", p->what, p->line, msg);
    return -1;
}

static int parse_int(parser_t *p, const char *key, const char *s, int min, int max, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno != 0 || v < min || v > max) {
        return fail(p, "%s=%s: expected an integer in [%d, %d]", key, s, min, max);
    }
    *out = (int) v;
    return 0;
}

static int parse_name(parser_t *p, const char *what, const char *s, char *out, size_t len)
{
    if (strlen(s) >= len) {
        return fail(p, "%s name '%s' longer than %zu characters", what, s, len - 1);
    }
    snprintf(out, len, "%s", s);
    return 0;
}

/* Splits "key=value"; returns the value or NULL. */
static char *split_kv(char *tok)
{
    char *eq = strchr(tok, '=');
    if (eq == NULL) {
        return NULL;
    }
    *eq = '\0';
    return eq + 1;
}

/* pci=, numa=, package=, pcie=: 1 consumed, 0 not a location key, -1 error. */
static int parse_loc_key(parser_t *p, const char *key, const char *val, xccl_topo_loc_t *loc)
{
    if (strcmp(key, "pci") == 0) {
        unsigned v[4];
        char extra;
        if (strcmp(val, "-") == 0) {
            loc->pci[0] = '\0';
            return 1;
        }
        if (strlen(val) >= sizeof(loc->pci)
            || sscanf(val, "%x:%x:%x.%x%c", &v[0], &v[1], &v[2], &v[3], &extra) != 4) {
            return fail(p, "pci=%s: expected dddd:bb:dd.f or -", val);
        }
        snprintf(loc->pci, sizeof(loc->pci), "%s", val);
        return 1;
    }
    if (strcmp(key, "numa") == 0) {
        return parse_int(p, key, val, -1, 1 << 20, &loc->numa) == 0 ? 1 : -1;
    }
    if (strcmp(key, "package") == 0) {
        return parse_int(p, key, val, -1, 1 << 20, &loc->package) == 0 ? 1 : -1;
    }
    if (strcmp(key, "pcie") == 0) {
        if (strlen(val) >= sizeof(loc->pcie)) {
            return fail(p, "pcie path longer than %zu characters", sizeof(loc->pcie) - 1);
        }
        if (val[0] == '/' || strstr(val, "//") || val[strlen(val) - 1] == '/') {
            return fail(p, "pcie=%s: empty path element", val);
        }
        snprintf(loc->pcie, sizeof(loc->pcie), "%s", strcmp(val, "-") == 0 ? "" : val);
        return 1;
    }
    return 0;
}

static int find_dev(const xccl_topo_t *topo, const char *name)
{
    for (int i = 0; i < topo->ndevs; i++) {
        if (strcmp(topo->devs[i].name, name) == 0) {
            return i;
        }
    }
    return -1;
}

static int find_nic(const xccl_topo_t *topo, const char *name)
{
    for (int i = 0; i < topo->nnics; i++) {
        if (strcmp(topo->nics[i].name, name) == 0) {
            return i;
        }
    }
    return -1;
}

static int parse_node(parser_t *p, xccl_topo_t *topo, char **tok, int n)
{
    if (n < 2) {
        return fail(p, "node: missing host name");
    }
    if (parse_name(p, "node", tok[1], topo->name, sizeof(topo->name)) != 0) {
        return -1;
    }
    for (int i = 2; i < n; i++) {
        char *val = split_kv(tok[i]);
        int *dst = NULL;
        if (val == NULL) {
            return fail(p, "node: expected key=value, got '%s'", tok[i]);
        }
        dst = strcmp(tok[i], "packages") == 0 ? &topo->packages
            : strcmp(tok[i], "numa") == 0 ? &topo->numa_nodes
            : strcmp(tok[i], "cores") == 0 ? &topo->cores
            : strcmp(tok[i], "pus") == 0 ? &topo->pus : NULL;
        if (dst == NULL) {
            return fail(p, "node: unknown key '%s'", tok[i]);
        }
        if (parse_int(p, tok[i], val, 0, 1 << 24, dst) != 0) {
            return -1;
        }
    }
    return 0;
}

static int parse_numa(parser_t *p, xccl_topo_t *topo, char **tok, int n)
{
    if (topo->nnuma == XCCL_TOPO_MAX_NUMA) {
        return fail(p, "more than %d numa lines", XCCL_TOPO_MAX_NUMA);
    }
    xccl_topo_numa_t *m = &topo->numa[topo->nnuma];
    m->package = -1;
    m->cores = m->pus = 0;
    if (n < 2 || parse_int(p, "numa", tok[1], 0, 1 << 20, &m->os_index) != 0) {
        return n < 2 ? fail(p, "numa: missing OS index") : -1;
    }
    for (int i = 2; i < n; i++) {
        char *val = split_kv(tok[i]);
        int *dst = NULL;
        if (val == NULL) {
            return fail(p, "numa: expected key=value, got '%s'", tok[i]);
        }
        int min = 0;
        if (strcmp(tok[i], "package") == 0) {
            dst = &m->package;
            min = -1;
        } else if (strcmp(tok[i], "cores") == 0) {
            dst = &m->cores;
        } else if (strcmp(tok[i], "pus") == 0) {
            dst = &m->pus;
        } else {
            return fail(p, "numa: unknown key '%s'", tok[i]);
        }
        if (parse_int(p, tok[i], val, min, 1 << 24, dst) != 0) {
            return -1;
        }
    }
    topo->nnuma++;
    return 0;
}

static int parse_device(parser_t *p, xccl_topo_t *topo, char **tok, int n)
{
    if (topo->ndevs == XCCL_TOPO_MAX_DEVS) {
        return fail(p, "more than %d devices", XCCL_TOPO_MAX_DEVS);
    }
    if (n < 2) {
        return fail(p, "device: missing name");
    }
    if (find_dev(topo, tok[1]) >= 0 || strcmp(tok[1], "nvswitch") == 0) {
        return fail(p, "device '%s' declared twice or reserved", tok[1]);
    }
    xccl_topo_dev_t *d = &topo->devs[topo->ndevs];
    memset(d, 0, sizeof(*d));
    d->loc.numa = d->loc.package = -1;
    d->nic = -1;
    if (parse_name(p, "device", tok[1], d->name, sizeof(d->name)) != 0) {
        return -1;
    }
    for (int i = 2; i < n; i++) {
        char *val = split_kv(tok[i]);
        if (val == NULL) {
            return fail(p, "device: expected key=value, got '%s'", tok[i]);
        }
        int rc = parse_loc_key(p, tok[i], val, &d->loc);
        if (rc < 0) {
            return -1;
        }
        if (rc > 0) {
            continue;
        }
        if (strcmp(tok[i], "kind") == 0) {
            int k;
            for (k = 0; k <= XCCL_TOPO_DEV_ACCEL; k++) {
                if (strcmp(val, xccl_topo_dev_kind_name((xccl_topo_dev_kind_t) k)) == 0) {
                    break;
                }
            }
            if (k > XCCL_TOPO_DEV_ACCEL) {
                return fail(p, "kind=%s: expected gpu, npu or accel", val);
            }
            d->kind = (xccl_topo_dev_kind_t) k;
        } else if (strcmp(tok[i], "vendor") == 0) {
            char *end;
            unsigned long v = strtoul(val, &end, 16);
            if (*val == '\0' || *end != '\0' || v > 0xffff) {
                return fail(p, "vendor=%s: expected a 16-bit hexadecimal PCI vendor id", val);
            }
            d->vendor = (unsigned) v;
        } else {
            return fail(p, "device: unknown key '%s'", tok[i]);
        }
    }
    topo->ndevs++;
    return 0;
}

static int parse_nic(parser_t *p, xccl_topo_t *topo, char **tok, int n)
{
    int have_type = 0;
    if (topo->nnics == XCCL_TOPO_MAX_NICS) {
        return fail(p, "more than %d nics", XCCL_TOPO_MAX_NICS);
    }
    if (n < 2) {
        return fail(p, "nic: missing name");
    }
    if (find_nic(topo, tok[1]) >= 0) {
        return fail(p, "nic '%s' declared twice", tok[1]);
    }
    xccl_topo_nic_t *nic = &topo->nics[topo->nnics];
    memset(nic, 0, sizeof(*nic));
    nic->loc.numa = nic->loc.package = -1;
    nic->ports = 1;
    if (parse_name(p, "nic", tok[1], nic->name, sizeof(nic->name)) != 0) {
        return -1;
    }
    for (int i = 2; i < n; i++) {
        char *val = split_kv(tok[i]);
        if (val == NULL) {
            return fail(p, "nic: expected key=value, got '%s'", tok[i]);
        }
        int rc = parse_loc_key(p, tok[i], val, &nic->loc);
        if (rc < 0) {
            return -1;
        }
        if (rc > 0) {
            continue;
        }
        if (strcmp(tok[i], "type") == 0) {
            int t;
            for (t = 0; t <= XCCL_TOPO_NIC_ETH; t++) {
                if (strcmp(val, xccl_topo_nic_type_name((xccl_topo_nic_type_t) t)) == 0) {
                    break;
                }
            }
            if (t > XCCL_TOPO_NIC_ETH) {
                return fail(p, "type=%s: expected ib, roce or eth", val);
            }
            nic->type = (xccl_topo_nic_type_t) t;
            have_type = 1;
        } else if (strcmp(tok[i], "ports") == 0) {
            if (parse_int(p, "ports", val, 0, 1024, &nic->ports) != 0) {
                return -1;
            }
        } else if (strcmp(tok[i], "rate") == 0) {
            char *end;
            errno = 0;
            nic->rate_gbps = strtod(val, &end);
            if (*val == '\0' || *end != '\0' || errno != 0 || !(nic->rate_gbps >= 0 && nic->rate_gbps < 1e9)) {
                return fail(p, "rate=%s: expected Gb/s, a number >= 0", val);
            }
        } else {
            return fail(p, "nic: unknown key '%s'", tok[i]);
        }
    }
    if (!have_type) {
        return fail(p, "nic %s: missing type=ib|roce|eth", nic->name);
    }
    topo->nnics++;
    return 0;
}

static int parse_link(parser_t *p, xccl_topo_t *topo, char **tok, int n)
{
    int type, count;
    if (n != 5) {
        return fail(p, "link: expected 'link DEV1 DEV2|nvswitch TYPE COUNT'");
    }
    int a = find_dev(topo, tok[1]);
    int b = strcmp(tok[2], "nvswitch") == 0 ? -2 : find_dev(topo, tok[2]);
    if (a < 0) {
        return fail(p, "link: unknown device '%s'", tok[1]);
    }
    if (b == -1) {
        return fail(p, "link: unknown device '%s'", tok[2]);
    }
    if (a == b) {
        return fail(p, "link: %s linked to itself", tok[1]);
    }
    for (type = 0; type <= XCCL_TOPO_LINK_HCCS; type++) {
        if (strcmp(tok[3], xccl_topo_link_type_name((xccl_topo_link_type_t) type)) == 0) {
            break;
        }
    }
    if (type > XCCL_TOPO_LINK_HCCS) {
        return fail(p, "link type '%s': expected nvlink, xgmi or hccs", tok[3]);
    }
    if (parse_int(p, "count", tok[4], 1, 255, &count) != 0) {
        return -1;
    }
    if (b == -2) {
        topo->devs[a].switch_links = count;
        topo->switch_link_type = (xccl_topo_link_type_t) type;
        return 0;
    }
    xccl_topo_link_t l = { (unsigned char) type, (unsigned char) count };
    topo->links[a][b] = topo->links[b][a] = l;
    return 0;
}

static int tokenize(char *line, char **tok)
{
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
        if (n == MAX_TOKENS) {
            return -1;
        }
        tok[n++] = t;
    }
    return n;
}

int xccl_topo_load_stream(FILE *in, const char *what, xccl_topo_t *topo, char *err, size_t errlen)
{
    parser_t p = { what, 0, err, errlen };
    char line[LINE_MAX_LEN];
    int have_version = 0, have_node = 0;
    xccl_topo_init(topo);
    while (fgets(line, sizeof(line), in)) {
        char *tok[MAX_TOKENS];
        p.line++;
        if (strchr(line, '\n') == NULL && !feof(in)) {
            return fail(&p, "line longer than %d characters", LINE_MAX_LEN - 2);
        }
        char *hash = strchr(line, '#');
        if (hash) {
            *hash = '\0';
        }
        int n = tokenize(line, tok);
        if (n < 0) {
            return fail(&p, "more than %d fields", MAX_TOKENS);
        }
        if (n == 0) {
            continue;
        }
        if (!have_version) {
            if (strcmp(tok[0], "xccl_topo") != 0 || n != 2) {
                return fail(&p, "expected 'xccl_topo 1' first");
            }
            if (strcmp(tok[1], "1") != 0) {
                return fail(&p, "unsupported format version '%s'", tok[1]);
            }
            have_version = 1;
            continue;
        }
        int rc;
        if (strcmp(tok[0], "node") == 0) {
            rc = have_node++ ? fail(&p, "second node line") : parse_node(&p, topo, tok, n);
        } else if (strcmp(tok[0], "numa") == 0) {
            rc = parse_numa(&p, topo, tok, n);
        } else if (strcmp(tok[0], "device") == 0) {
            rc = parse_device(&p, topo, tok, n);
        } else if (strcmp(tok[0], "nic") == 0) {
            rc = parse_nic(&p, topo, tok, n);
        } else if (strcmp(tok[0], "link") == 0) {
            rc = parse_link(&p, topo, tok, n);
        } else {
            rc = fail(&p, "unknown line '%s'", tok[0]);
        }
        if (rc != 0) {
            return -1;
        }
    }
    if (ferror(in)) {
        return fail(&p, "read error");
    }
    if (!have_version) {
        return fail(&p, "empty file: expected 'xccl_topo 1'");
    }
    xccl_topo_finalize(topo);
    return 0;
}

int xccl_topo_load(const char *path, xccl_topo_t *topo, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    int rc = xccl_topo_load_stream(f, path, topo, err, errlen);
    fclose(f);
    return rc;
}
