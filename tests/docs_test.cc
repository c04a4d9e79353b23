// The documentation against the program: every study file and command that README.md and docs/
// show is one the real `hyperpack` accepts. A ```yaml block is a study file (validated as it is)
// or, without a top-level `name:`, a fragment of one (its top-level keys laid over a minimal study,
// then validated); ```yaml other marks another tool's file, left alone. A line in any block that
// starts with `hyperpack `, `$ hyperpack ` or `build/cli/hyperpack ` is a command: the program
// has that command, and every --flag the line and its continued lines show is one that command's
// --help lists. The guide's synopsis lists exactly the commands `hyperpack --help` does, every
// examples/ file the pages name exists and validates, and ARCHITECTURE.md's drawing is the
// build's module graph.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace hyperpack {
namespace {

namespace fs = std::filesystem;
using hyperpack::testing::ReadFile;
using hyperpack::testing::RunCommand;
using hyperpack::testing::TempDir;
using hyperpack::testing::WriteFile;
using ::testing::HasSubstr;

// A fenced block of a page: its info string ("yaml", "yaml other", "sh", ...), its lines, and
// where it starts ("docs/guide/study-file.md:42").
struct Block {
  std::string info;
  std::vector<std::string> lines;
  std::string where;
};

std::vector<std::string> Pages() {
  const fs::path root = HYPERPACK_SOURCE_DIR;
  std::vector<std::string> pages = {"README.md"};
  for (const auto& entry : fs::recursive_directory_iterator(root / "docs"))
    if (entry.is_regular_file() && entry.path().extension() == ".md")
      pages.push_back(fs::relative(entry.path(), root).string());
  return pages;
}

std::vector<Block> BlocksOf(const std::string& page) {
  std::istringstream in(ReadFile(std::string(HYPERPACK_SOURCE_DIR) + "/" + page));
  std::vector<Block> blocks;
  bool open = false;
  size_t fence_indent = 0;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    const size_t indent = std::min(line.find_first_not_of(' '), line.size());
    const bool fence = line.compare(indent, 3, "```") == 0;
    if (fence && !open) {
      blocks.push_back({line.substr(indent + 3), {}, page + ":" + std::to_string(number)});
      fence_indent = indent;
      open = true;
    } else if (fence) {
      open = false;
    } else if (open) {
      // A block indented in a list item: its lines lose the fence's indent.
      blocks.back().lines.push_back(line.substr(std::min(indent, fence_indent)));
    }
  }
  return blocks;
}

std::vector<Block> AllBlocks() {
  std::vector<Block> all;
  for (const std::string& page : Pages())
    for (Block& b : BlocksOf(page)) all.push_back(std::move(b));
  return all;
}

// The top-level keys of a YAML text: lines that start with a key at column 0.
std::set<std::string> TopLevelKeys(const std::vector<std::string>& lines) {
  static const std::regex key(R"(^([A-Za-z_][A-Za-z0-9_]*):)");
  std::set<std::string> keys;
  std::smatch m;
  for (const std::string& line : lines)
    if (std::regex_search(line, m, key)) keys.insert(m[1]);
  return keys;
}

// A fragment laid over a minimal study, key by key (the base holds one key a line).
std::string OverBase(const std::vector<std::string>& fragment) {
  const std::map<std::string, std::string> base = {
      {"name", "name: doc-example"},
      {"objective", "objective: {metric: loss, direction: minimize}"},
      {"search_space", "search_space: {x: {type: float, low: 0, high: 1}}"},
      {"trial", "trial: {command: \"echo loss=1\"}"},
  };
  const std::set<std::string> given = TopLevelKeys(fragment);
  std::string text;
  for (const auto& [key, line] : base) {
    if (given.count(key) || (key == "objective" && given.count("objectives"))) continue;
    text += line + "\n";
  }
  for (const std::string& line : fragment) text += line + "\n";
  return text;
}

std::string Cli() { return HYPERPACK_CLI; }

TEST(DocsTest, EveryStudyFileAndFragmentTheyShowValidates) {
  TempDir dir;
  int checked = 0;
  for (const Block& b : AllBlocks()) {
    if (b.info != "yaml") continue;
    const bool whole = TopLevelKeys(b.lines).count("name") > 0;
    std::string text = whole ? "" : OverBase(b.lines);
    if (whole)
      for (const std::string& line : b.lines) text += line + "\n";
    const std::string path =
        (dir.path() / ("block" + std::to_string(checked++) + ".yaml")).string();
    WriteFile(path, text);
    auto ran = RunCommand({Cli(), "validate", path}, HYPERPACK_SOURCE_DIR);
    EXPECT_EQ(ran.exit_code, 0) << b.where << (whole ? "" : " (a fragment, over a minimal study)")
                                << ":\n"
                                << text << ran.err;
  }
  EXPECT_GT(checked, 5);
}

// A command as the pages show it: its name and the text of its line and continued lines.
struct Shown {
  std::string command;
  std::string text;
  std::string where;
};

std::vector<Shown> CommandsShown() {
  static const std::regex start(R"(^(\$ )?(build/cli/)?hyperpack ([a-z-]+)(.*)$)");
  std::vector<Shown> shown;
  for (const Block& b : AllBlocks()) {
    bool continuing = false;
    for (size_t i = 0; i < b.lines.size(); ++i) {
      // What follows " # " is a comment about the command, not part of it.
      const std::string line = b.lines[i].substr(0, b.lines[i].find(" # "));
      std::smatch m;
      if (std::regex_match(line, m, start)) {
        shown.push_back({m[3], m[4], b.where + " +" + std::to_string(i + 1)});
        continuing = true;
      } else if (continuing && line.rfind("  ", 0) == 0) {
        shown.back().text += " " + line;
      } else {
        continuing = false;
      }
    }
  }
  return shown;
}

TEST(DocsTest, EveryCommandTheyShowExistsWithTheFlagsItsHelpLists) {
  std::map<std::string, testing::Ran> help;
  const std::vector<Shown> shown = CommandsShown();
  ASSERT_GT(shown.size(), 20u);
  static const std::regex flag(R"((^|[\s\[|(])(--[a-z][a-z0-9-]*))");
  for (const Shown& s : shown) {
    if (!help.count(s.command)) help[s.command] = RunCommand({Cli(), s.command, "--help"});
    const testing::Ran& h = help[s.command];
    ASSERT_EQ(h.exit_code, 0) << s.where << ": no command '" << s.command << "'\n" << h.err;
    for (std::sregex_iterator it(s.text.begin(), s.text.end(), flag), end; it != end; ++it)
      EXPECT_THAT(h.out, HasSubstr((*it)[2].str()))
          << s.where << ": " << s.command << " shows " << (*it)[2] << ", which its --help lacks";
  }
}

// The commands `hyperpack --help` lists, in its "commands:" part.
std::set<std::string> CommandsListed() {
  auto help = RunCommand({Cli(), "--help"});
  EXPECT_EQ(help.exit_code, 0);
  std::set<std::string> listed;
  std::istringstream lines(help.out);
  bool in_commands = false;
  for (std::string line; std::getline(lines, line);) {
    if (line == "commands:") in_commands = true;
    if (!in_commands || line.size() < 3 || line.rfind("  ", 0) != 0 || line[2] == ' ') continue;
    listed.insert(line.substr(2, line.find(' ', 2) - 2));
  }
  return listed;
}

// The guide's synopsis and the program list the same commands (each line that starts a command
// in the block under "## Synopsis"; its flags are checked with every other command line).
TEST(DocsTest, TheGuidesSynopsisListsEveryCommandTheProgramHas) {
  const std::string page = "docs/guide/command-line.md";
  std::istringstream in(ReadFile(std::string(HYPERPACK_SOURCE_DIR) + "/" + page));
  std::set<std::string> synopsis;
  bool in_section = false, in_block = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Synopsis";
    if (!in_section) continue;
    if (line.rfind("```", 0) == 0) {
      if (in_block) break;
      in_block = true;
    } else if (in_block && line.rfind("hyperpack ", 0) == 0) {
      synopsis.insert(line.substr(10, line.find(' ', 10) - 10));
    }
  }
  ASSERT_FALSE(synopsis.empty()) << page << " has no '## Synopsis' block";
  EXPECT_EQ(synopsis, CommandsListed());
}

TEST(DocsTest, EveryExampleStudyTheyNameExistsAndValidates) {
  static const std::regex named(R"(examples/[A-Za-z0-9_./-]+\.yaml)");
  std::set<std::string> files;
  for (const std::string& page : Pages()) {
    const std::string text = ReadFile(std::string(HYPERPACK_SOURCE_DIR) + "/" + page);
    for (std::sregex_iterator it(text.begin(), text.end(), named), end; it != end; ++it)
      files.insert(it->str());
  }
  ASSERT_FALSE(files.empty());
  for (const std::string& file : files) {
    const fs::path path = fs::path(HYPERPACK_SOURCE_DIR) / file;
    ASSERT_TRUE(fs::exists(path)) << "the docs name " << file << ", which is not there";
    auto ran = RunCommand({Cli(), "validate", path.string()}, HYPERPACK_SOURCE_DIR);
    EXPECT_EQ(ran.exit_code, 0) << file << ":\n" << ran.err;
  }
}

// A graph of modules: each one's direct dependencies.
using Graph = std::map<std::string, std::set<std::string>>;

// Everything `from` reaches in `g`, through any number of arrows.
std::set<std::string> Reach(const Graph& g, const std::string& from) {
  std::set<std::string> seen;
  std::vector<std::string> todo = {from};
  while (!todo.empty()) {
    const std::string at = todo.back();
    todo.pop_back();
    auto it = g.find(at);
    if (it == g.end()) continue;
    for (const std::string& next : it->second)
      if (seen.insert(next).second) todo.push_back(next);
  }
  return seen;
}

// The build's module graph (cmake/module_graph.cmake writes it at configure time) against
// ARCHITECTURE.md's mermaid drawing: every module the build has is drawn, and each reaches, through
// the drawing's arrows, exactly the modules it reaches through the build's links. (A module this
// build leaves out, such as the trainer without libtorch, is passed over.)
TEST(DocsTest, TheArchitectureDrawingIsTheBuildsModuleGraph) {
  Graph build;
  std::istringstream file(ReadFile(HYPERPACK_MODULE_GRAPH));
  for (std::string line; std::getline(file, line);) {
    const size_t colon = line.find(':');
    ASSERT_NE(colon, std::string::npos) << line;
    std::istringstream deps(line.substr(colon + 1));
    auto& into = build[line.substr(0, colon)];
    for (std::string dep; deps >> dep;) into.insert(dep);
  }
  ASSERT_GT(build.size(), 10u);
  Graph drawn;
  static const std::regex arrow(R"(^\s*([a-z_]+)\s*-->\s*([a-z_]+)\s*$)");
  for (const Block& b : BlocksOf("docs/ARCHITECTURE.md")) {
    if (b.info != "mermaid") continue;
    for (const std::string& line : b.lines) {
      std::smatch m;
      if (std::regex_match(line, m, arrow)) {
        drawn[m[1]].insert(m[2]);
        drawn[m[2]];
      }
    }
  }
  ASSERT_FALSE(drawn.empty()) << "docs/ARCHITECTURE.md has no mermaid drawing";
  for (const auto& [module, deps] : build) {
    EXPECT_TRUE(drawn.count(module)) << module << " is a module of the build, not drawn";
    std::set<std::string> reached;
    for (const std::string& m : Reach(drawn, module))
      if (build.count(m)) reached.insert(m);
    EXPECT_EQ(reached, Reach(build, module)) << "what " << module << " reaches: drawn (left) "
                                             << "and linked (right)";
  }
}

}  // namespace
}  // namespace hyperpack
