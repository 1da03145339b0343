// In-guest assertions, after the KVM selftests' GUEST_ASSERT: a failure is
// reported with file, line, the expression and both values, and ends the run.
#pragma once
#include "runtime/format.h"
#include "runtime/ucall_report.h"

#define LV_CHECK(cond)                                                                         \
  do {                                                                                         \
    if (!(cond)) ::guest::assert_fail(__FILE__, __LINE__, ::guest::Text().str(#cond).c_str()); \
  } while (0)

#define LV_CHECK_MSG(cond, text)                                                                           \
  do {                                                                                                     \
    if (!(cond)) ::guest::assert_fail(__FILE__, __LINE__, ::guest::Text().str(#cond ": ").str(text).c_str()); \
  } while (0)

#define LV_CHECK_OP(a, op, b)                                                                   \
  do {                                                                                          \
    const auto lv_a_ = (a);                                                                     \
    const auto lv_b_ = (b);                                                                     \
    if (!(lv_a_ op lv_b_))                                                                      \
      ::guest::assert_fail(__FILE__, __LINE__,                                                  \
                           ::guest::Text()                                                      \
                               .str(#a " " #op " " #b " (")                                     \
                               .i(static_cast<::lockvisor::abi::i64>(lv_a_))                    \
                               .str(" vs ")                                                     \
                               .i(static_cast<::lockvisor::abi::i64>(lv_b_))                    \
                               .str(")")                                                        \
                               .c_str());                                                       \
  } while (0)

#define LV_CHECK_EQ(a, b) LV_CHECK_OP(a, ==, b)
#define LV_CHECK_NE(a, b) LV_CHECK_OP(a, !=, b)
#define LV_CHECK_LT(a, b) LV_CHECK_OP(a, <, b)
#define LV_CHECK_LE(a, b) LV_CHECK_OP(a, <=, b)
#define LV_CHECK_GE(a, b) LV_CHECK_OP(a, >=, b)
#define LV_CHECK_GT(a, b) LV_CHECK_OP(a, >, b)

namespace guest {
// A named case inside a guest program: brackets its checks in the report.
class Case {
 public:
  explicit Case(const char* name) : name_(name) { case_begin(name); }
  ~Case() { case_end(name_, true); }  // a failed check never returns here
  Case(const Case&) = delete;
  Case& operator=(const Case&) = delete;

 private:
  const char* name_;
};
}  // namespace guest
