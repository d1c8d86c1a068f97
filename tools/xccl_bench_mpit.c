/*
 * xccl_bench_mpit.c: switching xccl on and off per collective.
 *
 * The xccl component registers one MPI_T control variable per collective,
 * coll_xccl_<coll>_enable (1: xccl handles the call, 0: the call goes to the
 * module Open MPI would otherwise have used, "stock").  All ranks write it
 * at the same point, read it back, and meet in a barrier (the tool's own,
 * ctl_barrier).  Without the variables (xccl not loaded) only the stock
 * column is measured.  alltoallv_moe switches alltoallv's variable.
 */
#include <stdbool.h>
#include <string.h>

#include "xccl_bench_call.h"

static const char *mpit_err_name(int rc)
{
    switch (rc) {
    case MPI_T_ERR_INVALID_NAME: return "MPI_T_ERR_INVALID_NAME";
    case MPI_T_ERR_INVALID_INDEX: return "MPI_T_ERR_INVALID_INDEX";
    case MPI_T_ERR_INVALID_HANDLE: return "MPI_T_ERR_INVALID_HANDLE";
    case MPI_T_ERR_CVAR_SET_NEVER: return "MPI_T_ERR_CVAR_SET_NEVER (read-only or constant scope)";
    case MPI_T_ERR_CVAR_SET_NOT_NOW: return "MPI_T_ERR_CVAR_SET_NOT_NOW (not settable at run time)";
    case MPI_T_ERR_NOT_INITIALIZED: return "MPI_T_ERR_NOT_INITIALIZED";
    default: return "MPI_T error";
    }
}

/* Name, type and binding of cvar IDX; false if the index is not valid. */
static bool cvar_info(int idx, char *name, int namecap, MPI_Datatype *dt, int *bind)
{
    int nlen = namecap, verb, scope, dlen = 0;
    MPI_T_enum et;
    return MPI_T_cvar_get_info(idx, name, &nlen, &verb, dt, &et, NULL, &dlen, bind,
                               &scope) == MPI_SUCCESS;
}

/* Index of the cvar called NAME, or -1.  MPI_T_cvar_get_index is tried
 * first and its answer confirmed by name; a scan of all cvars is the
 * fallback, for implementations whose lookup misbehaves. */
static int cvar_find(const char *name)
{
    char got[256];
    MPI_Datatype dt;
    int idx, bind, num = 0;
    if (MPI_T_cvar_get_index(name, &idx) == MPI_SUCCESS &&
        cvar_info(idx, got, sizeof got, &dt, &bind) && strcmp(got, name) == 0)
        return idx;
    MPI_T_cvar_get_num(&num);
    for (idx = 0; idx < num; idx++)
        if (cvar_info(idx, got, sizeof got, &dt, &bind) && strcmp(got, name) == 0)
            return idx;
    return -1;
}

static int cvar_read(const cvar_t *cv, const char *name)
{
    int rc, v;
    if (cv->is_bool) {
        /* Open MPI stores an MCA bool in one byte and reads back just that. */
        bool b = false;
        rc = MPI_T_cvar_read(cv->handle, &b);
        v = b;
    } else {
        v = -1;
        rc = MPI_T_cvar_read(cv->handle, &v);
    }
    if (rc != MPI_SUCCESS)
        die(3, "MPI_T_cvar_read(%s) failed: %s (%d)", name, mpit_err_name(rc), rc);
    return v;
}

/* Write VALUE and verify it reads back. */
static void cvar_write(const cvar_t *cv, const char *name, int value)
{
    /* An int buffer serves MPI_C_BOOL too: Open MPI validates a bool write
     * by reading an int, then copies the variable's one byte from the start
     * of the buffer (the low byte: x86 is little-endian).  The read-back
     * check below catches any platform where that does not hold. */
    int v = value;
    int rc = MPI_T_cvar_write(cv->handle, &v);
    if (rc != MPI_SUCCESS)
        die(3, "MPI_T_cvar_write(%s = %d) failed: %s (%d); the variable must be registered "
            "settable (MCA_BASE_VAR_FLAG_SETTABLE, scope ALL_EQ)", name, value,
            mpit_err_name(rc), rc);
    int back = cvar_read(cv, name);
    if (back != value)
        die(3, "cvar %s reads back %d after writing %d", name, back, value);
}

/* Find and open the cvars of the selected collectives.  Returns false, and
 * opens none, when xccl is not loaded (no allreduce cvar). */
bool cvars_open(bench_t *B)
{
    int provided, rc = MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    if (rc != MPI_SUCCESS)
        die(3, "MPI_T_init_thread failed: %d", rc);

    bool loaded = cvar_find(colls[C_ALLREDUCE].cvar) >= 0;
    for (int c = 0; loaded && c < NCOLL; c++) {
        bool wanted = false;
        for (int k = 0; k < B->o->ncolls; k++)
            wanted |= B->o->colls[k] == c;
        int idx = wanted ? cvar_find(colls[c].cvar) : -1;
        if (idx < 0)
            continue;

        cvar_t *cv = &B->cv[c];
        char name[256];
        MPI_Datatype dt;
        int bind, count;
        if (!cvar_info(idx, name, sizeof name, &dt, &bind))
            die(3, "MPI_T_cvar_get_info(%s) failed", colls[c].cvar);
        if (dt != MPI_INT && dt != MPI_C_BOOL)
            die(3, "cvar %s: datatype is not MPI_INT (nor MPI_C_BOOL); cannot switch it",
                colls[c].cvar);
        if (bind != MPI_T_BIND_NO_OBJECT)
            die(3, "cvar %s: bound to an MPI object (bind %d); expected MPI_T_BIND_NO_OBJECT",
                colls[c].cvar, bind);
        rc = MPI_T_cvar_handle_alloc(idx, NULL, &cv->handle, &count);
        if (rc != MPI_SUCCESS || count != 1)
            die(3, "MPI_T_cvar_handle_alloc(%s) failed: %s (%d), count %d", colls[c].cvar,
                mpit_err_name(rc), rc, count);
        cv->found = true;
        cv->is_bool = dt == MPI_C_BOOL;
        cv->initial = cvar_read(cv, colls[c].cvar);
    }

    /* Every rank must have the same view, or the modes would diverge. */
    int mine[NCOLL + 1], lo[NCOLL + 1], hi[NCOLL + 1];
    for (int c = 0; c < NCOLL; c++)
        mine[c] = B->cv[c].found;
    mine[NCOLL] = loaded;
    ctl_reduce(mine, lo, NCOLL + 1, MPI_INT, MPI_MIN);
    ctl_reduce(mine, hi, NCOLL + 1, MPI_INT, MPI_MAX);
    if (B->rank == 0)
        for (int c = 0; c <= NCOLL; c++)
            if (lo[c] != hi[c])
                die(3, "ranks disagree on which xccl cvars exist (%s)",
                    c < NCOLL ? colls[c].cvar : "xccl loaded");
    ctl_barrier();
    return loaded;
}

/* The component's read-only cvar coll_xccl_world_active: whether xccl runs
 * MPI_COMM_WORLD's collectives (its set-up may have failed).  Older builds
 * without the variable count as active. */
bool xccl_world_active(void)
{
    int idx = cvar_find("coll_xccl_world_active"), count;
    if (idx < 0)
        return true;
    cvar_t cv = { .is_bool = true };
    MPI_Datatype dt;
    char name[256];
    int bind;
    /* xccl sets a communicator up at the first call it runs itself: one
     * small allreduce with coll_xccl_small_msg_bytes 0 for the moment
     * (MPI_T), so that MPI_COMM_WORLD's set-up has happened (or failed). */
    int sidx = cvar_find("coll_xccl_small_msg_bytes");
    if (sidx >= 0) {
        cvar_t sm = { .is_bool = false };
        if (MPI_T_cvar_handle_alloc(sidx, NULL, &sm.handle, &count) != MPI_SUCCESS)
            die(3, "MPI_T_cvar_handle_alloc(coll_xccl_small_msg_bytes) failed");
        int initial = cvar_read(&sm, "coll_xccl_small_msg_bytes"), one = 1, sum = 0;
        cvar_write(&sm, "coll_xccl_small_msg_bytes", 0);
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        cvar_write(&sm, "coll_xccl_small_msg_bytes", initial);
        MPI_T_cvar_handle_free(&sm.handle);
    }
    if (!cvar_info(idx, name, sizeof name, &dt, &bind))
        die(3, "MPI_T_cvar_get_info(coll_xccl_world_active) failed");
    cv.is_bool = dt == MPI_C_BOOL;
    if (MPI_T_cvar_handle_alloc(idx, NULL, &cv.handle, &count) != MPI_SUCCESS)
        die(3, "MPI_T_cvar_handle_alloc(coll_xccl_world_active) failed");
    int v = cvar_read(&cv, "coll_xccl_world_active");
    MPI_T_cvar_handle_free(&cv.handle);
    return v != 0;
}

/* Restore the initial values, free the handles, close MPI_T. */
void cvars_close(bench_t *B)
{
    for (int c = 0; c < NCOLL; c++) {
        cvar_t *cv = &B->cv[c];
        if (!cv->found)
            continue;
        cvar_write(cv, colls[c].cvar, cv->initial);
        MPI_T_cvar_handle_free(&cv->handle);
        cv->found = false;
    }
    ctl_barrier();
    MPI_T_finalize();
}

/* Route COLL to xccl or to the stock module, on all ranks at once.  A no-op
 * without the cvar (stock is then the only mode measured). */
void set_mode(bench_t *B, int coll, int mode)
{
    const cvar_t *cv = &B->cv[coll];
    if (!cv->found)
        return;
    cvar_write(cv, colls[coll].cvar, mode == M_XCCL ? 1 : 0);
    B->xccl_on = mode == M_XCCL;
    ctl_barrier();
}
