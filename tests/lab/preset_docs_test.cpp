// The preset names the documents list are the presets the binary has: the
// registry (vmm/lab/presets.h, embedded from vmm/lab/presets/*.toml) is the
// one list, and every list of them in README.md or docs/ is checked against
// it, so adding, renaming or dropping a preset fails here until the
// documents say so too.
//
// A document marks its list: <!-- presets --> ... <!-- /presets -->, on one
// line or around several (the markers are HTML comments, not shown). In a
// marked table the first cell of each row names a preset; elsewhere every
// `code span` does.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "vmm/lab/presets.h"

namespace lockvisor::lab {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kOpen = "<!-- presets -->";
constexpr std::string_view kClose = "<!-- /presets -->";

// The documents that must carry a marked list; any other document under
// README.md or docs/ that carries one is checked too.
const std::vector<std::string> kRequired = {"README.md", "docs/lab.md"};

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::set<std::string> registry_names() {
  std::set<std::string> names;
  for (const auto& p : presets()) names.insert(p.name);
  return names;
}

// The `code spans` of one piece of text, in order.
std::vector<std::string> code_spans(std::string_view text) {
  std::vector<std::string> spans;
  for (std::size_t at = text.find('`'); at != std::string_view::npos;) {
    const auto end = text.find('`', at + 1);
    if (end == std::string_view::npos) break;
    spans.emplace_back(text.substr(at + 1, end - at - 1));
    at = text.find('`', end + 1);
  }
  return spans;
}

// The names one marked block lists (see the top of the file).
std::vector<std::string> block_names(std::string_view block) {
  std::vector<std::string> names;
  std::istringstream lines{std::string(block)};
  std::string line;
  bool table = false;
  while (std::getline(lines, line)) {
    if (line.rfind('|', 0) == 0) {
      table = true;
      const auto first_cell = std::string_view(line).substr(1, line.find('|', 1) - 1);
      const auto spans = code_spans(first_cell);
      if (!spans.empty()) names.push_back(spans.front());  // the header and the rule have none
    } else if (!table) {
      for (auto& s : code_spans(line)) names.push_back(std::move(s));
    }
  }
  return names;
}

struct MarkedList {
  std::string where;  // "docs/lab.md, list 2"
  std::vector<std::string> names;
};

// Every marked list of one document; a marker without its pair is a failure.
std::vector<MarkedList> marked_lists(const std::string& relative) {
  const auto text = read_text(fs::path(LOCKVISOR_SOURCE_DIR) / relative);
  std::vector<MarkedList> lists;
  for (auto open = text.find(kOpen); open != std::string::npos; open = text.find(kOpen, open + 1)) {
    const auto close = text.find(kClose, open);
    const auto next_open = text.find(kOpen, open + 1);
    if (close == std::string::npos || close > next_open) {
      ADD_FAILURE() << relative << ": " << kOpen << " without its " << kClose;
      break;
    }
    const auto body = std::string_view(text).substr(open + kOpen.size(), close - open - kOpen.size());
    lists.push_back({relative + ", list " + std::to_string(lists.size() + 1), block_names(body)});
  }
  return lists;
}

std::vector<std::string> documents() {
  std::vector<std::string> docs = {"README.md"};
  for (const auto& entry : fs::recursive_directory_iterator(fs::path(LOCKVISOR_SOURCE_DIR) / "docs"))
    if (entry.path().extension() == ".md")
      docs.push_back(fs::relative(entry.path(), LOCKVISOR_SOURCE_DIR).string());
  return docs;
}

TEST(LabPresetDocs, TheRegistryHoldsEveryPresetFile) {
  std::set<std::string> files;
  for (const auto& entry : fs::directory_iterator(fs::path(LOCKVISOR_SOURCE_DIR) / "vmm/lab/presets"))
    if (entry.path().extension() == ".toml") files.insert(entry.path().stem().string());
  EXPECT_EQ(registry_names(), files) << "rebuild: the binary's presets are not vmm/lab/presets/*.toml";
}

TEST(LabPresetDocs, EveryMarkedListNamesEachPresetOnce) {
  const auto expected = registry_names();
  std::set<std::string> with_lists;
  for (const auto& doc : documents()) {
    for (const auto& list : marked_lists(doc)) {
      with_lists.insert(doc);
      const std::set<std::string> listed(list.names.begin(), list.names.end());
      EXPECT_EQ(listed.size(), list.names.size()) << list.where << " names a preset twice";
      for (const auto& name : expected)
        EXPECT_TRUE(listed.count(name)) << list.where << " omits the preset '" << name << "'";
      for (const auto& name : listed)
        EXPECT_TRUE(expected.count(name)) << list.where << " names '" << name << "', which is no preset";
    }
  }
  for (const auto& doc : kRequired)
    EXPECT_TRUE(with_lists.count(doc)) << doc << " has no list marked " << kOpen << " ... " << kClose;
}

TEST(LabPresetDocs, BlockNamesReadsTablesAndProse) {
  EXPECT_EQ(block_names("Presets: `quick`, `numa` (see `--list`)"),
            (std::vector<std::string>{"quick", "numa", "--list"}));
  EXPECT_EQ(block_names("\n| preset | what |\n|---|---|\n| `quick` | every `lock` |\n| `numa` | x |\n"),
            (std::vector<std::string>{"quick", "numa"}));
}

}  // namespace
}  // namespace lockvisor::lab
