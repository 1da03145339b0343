// The open-file limit against what a VM is about to open: a short soft limit
// is raised up to the hard one; a hard limit too low is a one-line host error
// naming the flag. The limits are the process's, so each case runs in a
// child (a lowered hard limit cannot be raised again without privilege).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "vmm/host/open_files.h"
#include "vmm/util/error.h"
#include "vmm/util/unique_fd.h"

namespace lockvisor::host {
namespace {

TEST(OpenFiles, CountsTheDescriptorsThisProcessOpens) {
  const std::uint64_t before = open_file_count();
  std::vector<UniqueFd> files;
  for (int i = 0; i < 5; ++i) files.emplace_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  EXPECT_EQ(open_file_count(), before + 5);
}

TEST(OpenFilesDeathTest, AShortSoftLimitIsRaisedToWhatTheVmNeeds) {
  EXPECT_EXIT(
      {
        rlimit limit{};
        ::getrlimit(RLIMIT_NOFILE, &limit);
        const rlim_t open_now = open_file_count();
        limit.rlim_cur = open_now + 8;
        if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < open_now + 1000) std::_Exit(2);  // no room to test
        ::setrlimit(RLIMIT_NOFILE, &limit);
        make_room_for_files(900, "--vcpus 300");
        ::getrlimit(RLIMIT_NOFILE, &limit);
        std::_Exit(limit.rlim_cur >= open_now + 900 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(OpenFilesDeathTest, AHardLimitTooLowIsOneLineNamingWhat) {
  EXPECT_EXIT(
      {
        rlimit limit{};
        const rlim_t open_now = open_file_count();
        limit.rlim_cur = limit.rlim_max = open_now + 8;
        ::setrlimit(RLIMIT_NOFILE, &limit);
        try {
          make_room_for_files(3 * 1024, "--vcpus 1024");
        } catch (const Error& e) {
          const std::string what = e.what();
          std::_Exit(e.kind() == ErrorKind::kHost && what.rfind("--vcpus 1024: needs ", 0) == 0 &&
                             what.find("ulimit -Hn") != std::string::npos && what.find('\n') == std::string::npos
                         ? 0
                         : 1);
        }
        std::_Exit(3);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace lockvisor::host
