/*
 * The end of every Check suite's main(): run the suite (Check's default
 * fork mode, normal output) and turn the failures into the exit status.
 */
#ifndef XCCL_TEST_CHECK_MAIN_H
#define XCCL_TEST_CHECK_MAIN_H

#include <check.h>
#include <stdlib.h>

static inline int xccl_check_run(Suite *su)
{
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
