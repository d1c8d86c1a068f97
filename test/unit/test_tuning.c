/* The tuning-file parser and lookup. */
#include "xccl_tuning.h"

#include <check.h>
#include "check_main.h"
#include <stdlib.h>
#include <string.h>

static const char *good =
    "# xccl tuning\n"
    "\n"
    "allreduce ranks=2-8 bytes=0-64K algo=recursive_doubling   # small\n"
    "allreduce  ranks=*  bytes=64K-*  algo=ring\n"
    "bcast\tranks=4-* bytes=1M-1G algo=fallback\n"
    "allreduce ranks=9-* bytes=* algo=rabenseifner\n";

START_TEST(parses_and_looks_up)
{
    xccl_tuning_t t;
    char err[200] = "";
    ck_assert_msg(0 == xccl_tuning_parse(good, &t, err, sizeof(err)), "%s", err);
    ck_assert_uint_eq(t.n, 4);
    ck_assert_int_eq(t.rules[0].line, 3);
    ck_assert_int_eq(t.rules[3].line, 6);

    const xccl_tuning_rule_t *r = xccl_tuning_lookup(&t, "allreduce", 4, 1000);
    ck_assert_ptr_nonnull(r);
    ck_assert_str_eq(r->algo, "recursive_doubling");
    /* upper byte bound is exclusive: 64K goes to the next rule */
    r = xccl_tuning_lookup(&t, "allreduce", 4, 65536);
    ck_assert_str_eq(r->algo, "ring");
    r = xccl_tuning_lookup(&t, "allreduce", 8, 65535);
    ck_assert_str_eq(r->algo, "recursive_doubling");
    /* ranks 9 and above, small: the first rule does not match, the second
     * does not either (bytes), the fourth does */
    r = xccl_tuning_lookup(&t, "allreduce", 9, 100);
    ck_assert_str_eq(r->algo, "rabenseifner");
    r = xccl_tuning_lookup(&t, "allreduce", 1, 100);
    ck_assert_ptr_null(r);
    r = xccl_tuning_lookup(&t, "bcast", 4, 1 << 20);
    ck_assert_str_eq(r->algo, "fallback");
    ck_assert_ptr_null(xccl_tuning_lookup(&t, "bcast", 4, 1ull << 30));
    ck_assert_ptr_null(xccl_tuning_lookup(&t, "bcast", 3, 1 << 20));
    ck_assert_ptr_null(xccl_tuning_lookup(&t, "alltoall", 4, 100));
    xccl_tuning_free(&t);
}
END_TEST

static void expect_error(const char *text, const char *want)
{
    xccl_tuning_t t;
    char err[200] = "";
    ck_assert_int_eq(xccl_tuning_parse(text, &t, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, want), "error \"%s\" lacks \"%s\"", err, want);
    ck_assert_uint_eq(t.n, 0);
    ck_assert_ptr_null(t.rules);
}

START_TEST(reports_bad_lines)
{
    expect_error("allreduce ranks=2-8 bytes=0-64K\n", "line 1: want");
    expect_error("\n# x\nallreduce ranks=2-8 bytes=0-64Q algo=ring\n", "line 3: bad bytes range");
    expect_error("allreduce ranks=2 bytes=* algo=ring\n", "line 1: bad ranks range");
    expect_error("allreduce bytes=* ranks=* algo=ring\n", "in this order");
    expect_error("allreduce ranks=* bytes=* algo=\n", "empty");
}
END_TEST

START_TEST(empty_text_has_no_rules)
{
    xccl_tuning_t t;
    char err[16];
    ck_assert_int_eq(xccl_tuning_parse("# nothing\n\n", &t, err, sizeof(err)), 0);
    ck_assert_uint_eq(t.n, 0);
    ck_assert_ptr_null(xccl_tuning_lookup(&t, "allreduce", 2, 8));
    xccl_tuning_free(&t);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("tuning");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, parses_and_looks_up);
    tcase_add_test(tc, reports_bad_lines);
    tcase_add_test(tc, empty_text_has_no_rules);
    suite_add_tcase(su, tc);
    return xccl_check_run(su);
}
