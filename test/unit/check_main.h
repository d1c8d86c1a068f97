/*
 * The end of every Check suite's main(): run the suite (Check's default
 * fork mode, normal output) and turn the failures into the exit status;
 * and a test case made and added in one call.
 */
#ifndef XCCL_TEST_CHECK_MAIN_H
#define XCCL_TEST_CHECK_MAIN_H

#include <check.h>
#include <stdlib.h>

/* A test case of su named name (CK_RUN_CASE=name runs it alone), each of
 * its tests under timeout_s. */
static inline TCase *xccl_check_tcase(Suite *su, const char *name, double timeout_s)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, timeout_s);
    suite_add_tcase(su, tc);
    return tc;
}

static inline int xccl_check_run(Suite *su)
{
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
