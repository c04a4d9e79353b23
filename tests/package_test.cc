// The Debian package that `cpack` builds from this build tree, installed into a scratch root with
// dpkg-deb: its dependencies are Debian's runtime packages, and its programs run from there.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "test_util.h"

namespace hyperpack {
namespace {

using hyperpack::testing::RunCommand;
using hyperpack::testing::TempDir;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

TEST(PackageTest, TheDebInstallsIntoAScratchRootAndRunsFromThere) {
  TempDir dir;
  auto pack = RunCommand({HYPERPACK_CPACK, "-B", dir / "pkg", "--config",
                          std::string(HYPERPACK_BINARY_DIR) + "/CPackConfig.cmake"},
                         HYPERPACK_BINARY_DIR);
  ASSERT_EQ(pack.exit_code, 0) << pack.out << pack.err;
  std::string deb;
  for (const auto& entry : fs::directory_iterator(dir / "pkg"))
    if (entry.path().extension() == ".deb") deb = entry.path().string();
  ASSERT_FALSE(deb.empty()) << pack.out;

  auto depends = RunCommand({"/usr/bin/dpkg-deb", "-f", deb, "Depends"});
  ASSERT_EQ(depends.exit_code, 0) << depends.err;
  EXPECT_THAT(depends.out, HasSubstr("libsqlite3-0"));
  EXPECT_THAT(depends.out, HasSubstr("libyaml-cpp"));
#ifdef HYPERPACK_PACKAGE_HAS_TRAINER
  EXPECT_THAT(depends.out, HasSubstr("libtorch"));
#endif

  std::string root = dir / "root";
  ASSERT_EQ(RunCommand({"/usr/bin/dpkg-deb", "-x", deb, root}).exit_code, 0);
  const std::string bin = root + "/usr/bin/";
  auto version = RunCommand({bin + "hyperpack", "--version"});
  EXPECT_EQ(version.exit_code, 0) << version.err;
  EXPECT_THAT(version.out, HasSubstr(HYPERPACK_VERSION));
  // The examples come with it, and the installed tool reads them.
  const std::string examples = root + "/usr/share/hyperpack/examples/";
  for (const char* example :
       {"fmnist/quickstart.yaml", "fmnist/asha.yaml", "fmnist_softmax/study.yaml"}) {
    auto validate = RunCommand({bin + "hyperpack", "validate", examples + example});
    EXPECT_EQ(validate.exit_code, 0) << example << ": " << validate.out << validate.err;
  }
  EXPECT_TRUE(fs::exists(root + "/usr/share/doc/hyperpack/README.md"));
#ifdef HYPERPACK_PACKAGE_HAS_PYTHON
  // The Python module, where Debian's python3 looks: an Optuna study on its sampler.
  auto python = RunCommand({"/usr/bin/env", "PYTHONPATH=" + root + "/usr/lib/python3/dist-packages",
                            "/usr/bin/python3", "-c",
                            "import optuna, hyperpack.optuna\n"
                            "s = optuna.create_study(sampler=hyperpack.optuna.GPSampler(seed=0))\n"
                            "s.optimize(lambda t: t.suggest_float('x', 0, 1), n_trials=3)\n"
                            "print(hyperpack.optuna.__file__, len(s.trials))"});
  EXPECT_EQ(python.exit_code, 0) << python.err;
  EXPECT_THAT(python.out, HasSubstr(root + "/usr/lib/python3/dist-packages/hyperpack/optuna.py 3"));
#endif
#ifdef HYPERPACK_PACKAGE_HAS_TRAINER
  auto help = RunCommand({bin + "hyperpack-trainer", "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_THAT(help.out, HasSubstr("--grad-compression"));
  // The installed quickstart runs as written: its `hyperpack-trainer` is the one installed beside
  // this hyperpack, whatever PATH says.
  if (fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    auto run = RunCommand({bin + "hyperpack", "run", examples + "fmnist/quickstart.yaml",
                           "--storage", dir / "q.db", "--max-trials", "1", "--progress", "quiet"},
                          dir.path().string());
    EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
    auto trials =
        RunCommand({bin + "hyperpack", "trials", "fmnist-quickstart", "--storage", dir / "q.db"});
    EXPECT_THAT(trials.out, HasSubstr("completed")) << trials.out;
  }
#endif
}

}  // namespace
}  // namespace hyperpack
