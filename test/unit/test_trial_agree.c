/*
 * The agreement at the end of a level trial (mca_coll_xccl_level_trial_end,
 * ompi_coll_xccl/coll_xccl_level_trials.c) on a module of stubs: the
 * ranks' readings go through xccl's own allreduce entry
 * (m->super.coll_allreduce) with m->quiet set for that call only, never
 * through the fallback's (m->prev.allreduce), and the pick follows what
 * that allreduce returns.
 *
 * No MPI run can tell the two apart by xccl's verbose output: neither the
 * fallback's allreduce nor xccl's own under m->quiet writes a line or a
 * count.  Here each stub counts its calls and records m->quiet.
 *
 * The stub of xccl's allreduce stands for a communicator of two ranks: it
 * returns the MAX of this rank's readings and those of a peer the test
 * makes up, whose calls of one candidate end late; so the agreed pick is
 * the other candidate, whatever this rank's own readings say.  The
 * fallback's stub returns this rank's readings unchanged.  The picks kept
 * for later communicators: agreed after a trial's first call, where the
 * made-up peer kept the same pick.  The picks kept for later processes
 * (coll_xccl_picks.c): the file read, merged and written back, a bad one
 * refused whole, and a pick read from it ending a trial.
 */
#include "ompi_config.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ompi_coll_xccl/coll_xccl_level.h"
#include "ompi_coll_xccl/coll_xccl_log.h"
#include "ompi_coll_xccl/coll_xccl_picks.h"

#include "check_main.h"

/* The component's global and its log, which the trial's end reads and
 * writes: stand-ins that keep the last line. */
mca_coll_xccl_component_t mca_coll_xccl_component;
static char last_line[1024];
static int lines;

void mca_coll_xccl_log(int level, const char *fmt, ...)
{
    if (level <= mca_coll_xccl_component.verbose) {
        va_list ap;
        lines++;
        va_start(ap, fmt);
        vsnprintf(last_line, sizeof(last_line), fmt, ap);
        va_end(ap);
    }
}

static mca_coll_xccl_module_t mod;
static struct mca_coll_xccl_level level;
static uint64_t peer[2][2][XCCL_TRIAL_MAX];   /* the made-up peer's readings */
static int own_calls, own_quiet, fallback_calls, own_rc;
static int kept_calls, kept_quiet, peer_kept;  /* the picks kept: agreements, the peer's */

/* xccl's allreduce entry, as the trial's end must call it: after the
 * first call the agreement on kept picks (MIN of pick and -pick; the
 * made-up peer kept peer_kept, 0 none), at the early check and the end
 * the readings' (MAX). */
static int own_allreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                         struct ompi_op_t *op, struct ompi_communicator_t *comm,
                         mca_coll_base_module_t *module)
{
    if (2 == count) {
        kept_calls++;
        kept_quiet += mod.quiet;
        ck_assert_ptr_eq(dtype, MPI_INT);
        ck_assert_ptr_eq(op, MPI_MIN);
        ck_assert_ptr_eq(comm, mod.comm);
        ck_assert_ptr_eq(module, &mod.super);
        const int *in = sbuf;
        int *out = rbuf;
        out[0] = in[0] < peer_kept ? in[0] : peer_kept;
        out[1] = in[1] < -peer_kept ? in[1] : -peer_kept;
        return own_rc;
    }
    own_calls++;
    own_quiet += mod.quiet;
    ck_assert_int_eq(count, 2 * 2 * XCCL_TRIAL_MAX);
    ck_assert_ptr_eq(dtype, MPI_UINT64_T);
    ck_assert_ptr_eq(op, MPI_MAX);
    ck_assert_ptr_eq(comm, mod.comm);
    ck_assert_ptr_eq(module, &mod.super);
    const uint64_t *in = sbuf, *p = &peer[0][0][0];
    uint64_t *out = rbuf;
    for (int i = 0; i < count; i++) {
        out[i] = in[i] > p[i] ? in[i] : p[i];
    }
    return own_rc;
}

/* The fallback's allreduce: this rank's readings alone. */
static int fallback_allreduce(const void *sbuf, void *rbuf, int count,
                              struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                              struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    (void) dtype;
    (void) op;
    (void) comm;
    (void) module;
    fallback_calls++;
    memcpy(rbuf, sbuf, (size_t) count * sizeof(uint64_t));
    return MPI_SUCCESS;
}

/* A fresh module and a quiet trial of bcast at 64 KiB: 4 timed calls of
 * each candidate in blocks of 3 (the first untimed), no warm-up calls, so
 * an early check after call 5 and the last agreement after call 11. */
static xccl_trial_t fresh_trial(void)
{
    memset(&mod, 0, sizeof(mod));
    memset(&level, 0, sizeof(level));
    memset(peer, 0, sizeof(peer));
    mod.comm = (ompi_communicator_t *) &level;  /* any address: compared only */
    mod.level = &level;
    mod.size = level.node_size = 2;
    mod.super.coll_allreduce = own_allreduce;
    mod.prev.allreduce = fallback_allreduce;
    mca_coll_xccl_component.verbose = 1;
    own_calls = own_quiet = fallback_calls = lines = 0;
    kept_calls = kept_quiet = peer_kept = 0;
    own_rc = MPI_SUCCESS;
    last_line[0] = '\0';
    xccl_trial_t t = { .block = 3, .untimed = 1, .samples = 4 };
    t.cand[0] = xccl_select_index(XCCL_COLL_BCAST, "shm");
    t.cand[1] = xccl_select_index(XCCL_COLL_BCAST, "mesh");
    return t;
}

/* Runs the trial's calls, each of shm_ns or mesh_ns on this rank, through
 * mca_coll_xccl_level_trial_end; the made-up peer starts each call with
 * this rank and ends its shm calls peer_shm_ns after the start.  Returns
 * the last call's return code. */
static int run_calls(xccl_trial_t *t, int calls, uint64_t shm_ns, uint64_t mesh_ns,
                     uint64_t peer_shm_ns)
{
    int rc = MPI_SUCCESS;
    for (int i = 0; i < calls && 0 == t->pick; i++) {
        const int j = xccl_trial_next(t) == t->cand[1];
        const uint64_t t0 = 1000000u * (uint64_t) (i + 1);
        const int at = (i / t->block / 2) * (t->block - t->untimed) + i % t->block - t->untimed;
        if (i % t->block >= t->untimed) {
            peer[0][j][at] = t0;
            peer[1][j][at] = t0 + (j ? mesh_ns : peer_shm_ns);
        }
        rc = mca_coll_xccl_level_trial_end(&mod, XCCL_COLL_BCAST, 65536, t, t0,
                                           t0 + (j ? mesh_ns : shm_ns));
        ck_assert_int_eq(mod.quiet, 0);         /* set for the agreement only */
    }
    return rc;
}

/* n agreements on the readings and one on kept picks (after the first
 * call), each through xccl's own allreduce with quiet set, none through
 * the fallback's; the trial decided: pick. */
static void check_agreements(const xccl_trial_t *t, int n, int pick)
{
    ck_assert_int_eq(fallback_calls, 0);
    ck_assert_int_eq(own_calls, n);
    ck_assert_int_eq(own_quiet, n);
    ck_assert_int_eq(kept_calls, 1);
    ck_assert_int_eq(kept_quiet, 1);
    ck_assert_int_eq(t->pick, pick);
}

/* Two agreements (the early check, not clear; the last call), both
 * through xccl's own allreduce with quiet set; the pick is the agreed
 * one, mesh (the peer's shm calls end late), not this rank's own, shm. */
START_TEST(agreement_through_own_allreduce)
{
    xccl_trial_t t = fresh_trial();
    ck_assert_int_eq(run_calls(&t, 12, 10000, 12000, 14000), MPI_SUCCESS);
    check_agreements(&t, 2, t.cand[1]);
    ck_assert_uint_eq(level.lat_picked[XCCL_COLL_BCAST], 0);
    ck_assert_int_eq(lines, 1);                 /* the trial's own line, no other */
    ck_assert_msg(strstr(last_line, "trial bcast ") && strstr(last_line, " pick=mesh"), "%s",
                  last_line);
}
END_TEST

/* A clear case: one agreement, at the early check; shm picked, which the
 * level's latency path then follows. */
START_TEST(clear_case_one_agreement)
{
    xccl_trial_t t = fresh_trial();
    ck_assert_int_eq(run_calls(&t, 12, 10000, 40000, 10000), MPI_SUCCESS);
    check_agreements(&t, 1, t.cand[0]);
    ck_assert_uint_eq(level.lat_picked[XCCL_COLL_BCAST], (uint64_t) 1 << xccl_size_class(65536));
    ck_assert_msg(strstr(last_line, " clear pick=shm"), "%s", last_line);
}
END_TEST

/* xccl's allreduce fails: no retry through the fallback; the trial goes
 * on past the early check and ends on shm with the failure said; quiet
 * is cleared after each call all the same. */
START_TEST(failed_agreement_no_fallback)
{
    xccl_trial_t t = fresh_trial();
    own_rc = MPI_ERR_INTERN;
    ck_assert_int_eq(run_calls(&t, 12, 10000, 12000, 14000), MPI_ERR_INTERN);
    check_agreements(&t, 2, t.cand[0]);
    ck_assert_msg(strstr(last_line, "(the agreement failed: shm)"), "%s", last_line);
}
END_TEST

/* A pick agreed on one communicator is kept: the next trial of the same
 * situation on another module ends after its first call where the peer
 * kept the same pick, with one agreement and no readings agreed, and says
 * so in its line. */
START_TEST(kept_pick_ends_the_next_trial)
{
    xccl_trial_t t = fresh_trial();
    ck_assert_int_eq(run_calls(&t, 12, 10000, 12000, 14000), MPI_SUCCESS);
    ck_assert_int_eq(t.pick, t.cand[1]);
    xccl_trial_t u = fresh_trial();
    peer_kept = u.cand[1];
    ck_assert_int_eq(run_calls(&u, 1, 10000, 12000, 14000), MPI_SUCCESS);
    ck_assert_int_eq(u.pick, u.cand[1]);
    ck_assert_int_eq(kept_calls, 1);
    ck_assert_int_eq(own_calls, 0);
    ck_assert_uint_eq(level.lat_picked[XCCL_COLL_BCAST], 0);
    ck_assert_msg(strstr(last_line, "kept from earlier communicators") && strstr(last_line, " pick=mesh"),
                  "%s", last_line);
}
END_TEST

/* Where the peer kept nothing (or another pick), the trial runs in full
 * and the readings decide: here shm, though this rank kept mesh. */
START_TEST(kept_pick_of_one_rank_only)
{
    xccl_trial_t t = fresh_trial();
    ck_assert_int_eq(run_calls(&t, 12, 10000, 12000, 14000), MPI_SUCCESS);
    ck_assert_int_eq(t.pick, t.cand[1]);
    /* the peer kept shm, then nothing (each full trial keeps its pick,
     * shm, for the next) */
    for (int other = 1; other >= 0; other--) {
        xccl_trial_t u = fresh_trial();
        peer_kept = other ? u.cand[0] : 0;
        ck_assert_int_eq(run_calls(&u, 12, 10000, 40000, 10000), MPI_SUCCESS);
        check_agreements(&u, 1, u.cand[0]);
    }
}
END_TEST

/* ---------------------------------------------------------- the picks file */

static char dir[64];

/* After each test: its directory gone. */
static void drop_dir(void)
{
    char cmd[96];
    if ('\0' != dir[0]) {
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        ck_assert_int_eq(system(cmd), 0);
        dir[0] = '\0';
    }
}

/* A fresh directory for the test's files, and no picks kept. */
static void fresh_dir(void)
{
    snprintf(dir, sizeof(dir), "/tmp/xccl-picks.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    xccl_picks_clear();
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_ge(fputs(text, f), 0);
    ck_assert_int_eq(fclose(f), 0);
}

static char *read_all(const char *path)
{
    static char text[4096];
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    const size_t n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

static const xccl_situation_t two = { .ranks = 2, .node = 2, .noisy = 0 };

/* Picks kept here are written (into a directory made for it) and read
 * back by a later process as the file's; that process, timing nothing of
 * its own, writes nothing. */
START_TEST(file_round_trip)
{
    fresh_dir();
    char path[128];
    snprintf(path, sizeof(path), "%s/a/b/picks", dir);
    const int mesh = xccl_select_index(XCCL_COLL_BCAST, "mesh");
    const int shm = xccl_select_index(XCCL_COLL_ALLGATHERV, "shm");
    const xccl_situation_t noisy = { .ranks = 4, .node = 4, .noisy = 1 };
    char err[160] = "";
    ck_assert_int_eq(xccl_picks_save(path, 0, 1000, err, sizeof(err)), 0);   /* nothing kept */
    xccl_picks_put(XCCL_COLL_BCAST, 17, &two, mesh);
    xccl_picks_put(XCCL_COLL_ALLGATHERV, 20, &noisy, shm);
    ck_assert_int_eq(xccl_picks_save(path, 0, 1000, err, sizeof(err)), 2);
    const char *text = read_all(path);
    ck_assert_msg(strstr(text, "\nbcast 17 2 2 quiet mesh 1000\n"), "%s", text);
    ck_assert_msg(strstr(text, "\nallgatherv 20 4 4 noisy shm 1000\n"), "%s", text);
    xccl_picks_clear();
    ck_assert_int_eq(xccl_picks_get(XCCL_COLL_BCAST, 17, &two, NULL), 0);
    ck_assert_int_eq(xccl_picks_load(path, 0, err, sizeof(err)), 2);
    int from_file = 0;
    ck_assert_int_eq(xccl_picks_get(XCCL_COLL_BCAST, 17, &two, &from_file), mesh);
    ck_assert_int_eq(from_file, 1);
    ck_assert_int_eq(xccl_picks_get(XCCL_COLL_ALLGATHERV, 20, &noisy, NULL), shm);
    /* another situation, class or collective: none */
    ck_assert_int_eq(xccl_picks_get(XCCL_COLL_ALLGATHERV, 20, &two, NULL), 0);
    ck_assert_int_eq(xccl_picks_get(XCCL_COLL_BCAST, 18, &two, NULL), 0);
    ck_assert_int_eq(xccl_picks_get(XCCL_COLL_ALLREDUCE, 17, &two, NULL), 0);
    ck_assert_int_eq(xccl_picks_save(path, 0, 2000, err, sizeof(err)), 0);
    ck_assert_str_eq(read_all(path), text);
}
END_TEST

/* A process's own picks replace the file's of the same situations; the
 * file's other lines stay, except those older than `since`. */
START_TEST(file_merge)
{
    fresh_dir();
    char path[128];
    snprintf(path, sizeof(path), "%s/picks", dir);
    write_file(path, "# a comment\n"
                     "bcast 17 2 2 quiet shm 900\n"
                     "  alltoall 15 2 2 quiet mesh 800\n"
                     "\n"
                     "gather 12 3 3 quiet shm 100\n");
    char err[160] = "";
    ck_assert_int_eq(xccl_picks_load(path, 500, err, sizeof(err)), 2);   /* not gather's */
    ck_assert_int_eq(xccl_picks_get(XCCL_COLL_GATHER, 12, &(xccl_situation_t){ 3, 3, 0 }, NULL), 0);
    xccl_picks_put(XCCL_COLL_BCAST, 17, &two, xccl_select_index(XCCL_COLL_BCAST, "mesh"));
    int from_file = 1;
    ck_assert_int_gt(xccl_picks_get(XCCL_COLL_BCAST, 17, &two, &from_file), 0);
    ck_assert_int_eq(from_file, 0);
    ck_assert_int_eq(xccl_picks_save(path, 500, 1000, err, sizeof(err)), 2);
    const char *text = read_all(path);
    ck_assert_msg(strstr(text, "\nbcast 17 2 2 quiet mesh 1000\n"), "%s", text);
    ck_assert_msg(strstr(text, "\nalltoall 15 2 2 quiet mesh 800\n"), "%s", text);
    ck_assert_msg(!strstr(text, "shm 900") && !strstr(text, "gather 12"), "%s", text);
}
END_TEST

/* A file with a line that is not one is refused whole, saying which line;
 * a later save replaces it. */
START_TEST(file_bad)
{
    static const char *const bad[] = {
        "bcast 17 2 2 quiet mesh 900\nbcast 17 2 2 quiet mesh\n",
        "bcast 17 2 2 quiet mesh 900\nbcast 17 2 2 quiet mesh 900 extra\n",
        "bcast 17 2 2 quiet mesh 900\nbroadcast 17 2 2 quiet mesh 900\n",
        "bcast 17 2 2 quiet mesh 900\nbcast 17 2 2 quiet warp 900\n",
        "bcast 17 2 2 quiet mesh 900\nbcast 17 2 2 loud mesh 900\n",
        "bcast 17 2 2 quiet mesh 900\nbcast 99 2 2 quiet mesh 900\n",
        "bcast 17 2 2 quiet mesh 900\nbcast 17 0 2 quiet mesh 900\n",
        "bcast 17 2 2 quiet mesh 900\nbcast 17 2 2 quiet auto 900\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        drop_dir();
        fresh_dir();
        char path[128], err[160] = "";
        snprintf(path, sizeof(path), "%s/picks", dir);
        write_file(path, bad[i]);
        ck_assert_int_eq(xccl_picks_load(path, 0, err, sizeof(err)), -1);
        ck_assert_msg(strstr(err, "line 2 "), "%zu: %s", i, err);
        ck_assert_int_eq(xccl_picks_get(XCCL_COLL_BCAST, 17, &two, NULL), 0);
        xccl_picks_put(XCCL_COLL_BCAST, 16, &two, xccl_select_index(XCCL_COLL_BCAST, "shm"));
        ck_assert_int_eq(xccl_picks_save(path, 0, 1000, err, sizeof(err)), 1);
        ck_assert_int_eq(xccl_picks_load(path, 0, err, sizeof(err)), 1);
    }
    /* no file: no picks, no error */
    char err[160] = "";
    ck_assert_int_eq(xccl_picks_load("/nonexistent/xccl/picks", 0, err, sizeof(err)), 0);
}
END_TEST

/* The parameter's values: none and "" no file, a path as given, auto
 * under $XDG_CACHE_HOME, else $HOME/.cache, else none. */
START_TEST(file_path)
{
    char host[256] = "", want[512];
    ck_assert_int_eq(gethostname(host, sizeof(host) - 1), 0);
    ck_assert_ptr_null(xccl_picks_path("none"));
    ck_assert_ptr_null(xccl_picks_path(""));
    ck_assert_ptr_null(xccl_picks_path(NULL));
    char *p = xccl_picks_path("/x/y");
    ck_assert_str_eq(p, "/x/y");
    free(p);
    setenv("XDG_CACHE_HOME", "/c", 1);
    setenv("HOME", "/h", 1);
    snprintf(want, sizeof(want), "/c/xccl/picks-%s", host);
    ck_assert_str_eq(p = xccl_picks_path("auto"), want);
    free(p);
    unsetenv("XDG_CACHE_HOME");
    snprintf(want, sizeof(want), "/h/.cache/xccl/picks-%s", host);
    ck_assert_str_eq(p = xccl_picks_path("auto"), want);
    free(p);
    unsetenv("HOME");
    ck_assert_ptr_null(xccl_picks_path("auto"));
}
END_TEST

/* A pick read from the file ends a trial where the peer has the same,
 * and the line says where it came from; none of this process's own, so
 * nothing to write. */
START_TEST(file_pick_ends_a_trial)
{
    fresh_dir();
    char path[128], err[160] = "";
    snprintf(path, sizeof(path), "%s/picks", dir);
    write_file(path, "bcast 17 2 2 quiet mesh 900\n");
    ck_assert_int_eq(xccl_picks_load(path, 0, err, sizeof(err)), 1);
    xccl_trial_t u = fresh_trial();
    peer_kept = u.cand[1];
    ck_assert_int_eq(run_calls(&u, 1, 10000, 12000, 14000), MPI_SUCCESS);
    ck_assert_int_eq(u.pick, u.cand[1]);
    ck_assert_int_eq(own_calls, 0);
    ck_assert_msg(strstr(last_line, "kept from earlier processes (coll_xccl_picks_file)") &&
                  strstr(last_line, " pick=mesh"), "%s", last_line);
    ck_assert_int_eq(xccl_picks_save(path, 0, 1000, err, sizeof(err)), 0);
    xccl_picks_clear();
}
END_TEST

int main(void)
{
    const TTest *const tests[] = { agreement_through_own_allreduce, clear_case_one_agreement,
                                   failed_agreement_no_fallback, kept_pick_ends_the_next_trial,
                                   kept_pick_of_one_rank_only, file_round_trip, file_merge,
                                   file_bad, file_path, file_pick_ends_a_trial };
    Suite *su = suite_create("trial_agree");
    TCase *tc = tcase_create("trial_agree");
    tcase_add_checked_fixture(tc, NULL, drop_dir);
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
        tcase_add_test(tc, tests[i]);
    }
    suite_add_tcase(su, tc);
    return xccl_check_run(su);
}
