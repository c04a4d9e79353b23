// A throwaway PostgreSQL server for tests: initdb and pg_ctl (Debian's postgresql-15, which
// scripts/test installs) with the data, socket and log under one temporary directory, listening on
// a free loopback port, stopped (immediately) and removed when the object dies. Its cluster is a
// copy of one that initdb made once for the build (MakeData). Run as root, the server's programs
// run as the `postgres` user the package creates, as PostgreSQL refuses root. Each test asks for a
// database of its own (NewDatabase).
// Thread-safety: create, use and destroy on one thread.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "test_util.h"

namespace hyperpack::testing {

class LocalPostgres {
 public:
  // Starts a server; nullptr and `error` (why, with the log's tail) when it could not.
  static std::unique_ptr<LocalPostgres> Start(std::string* error) {
    auto pg = std::unique_ptr<LocalPostgres>(new LocalPostgres());
    pg->bin_ = BinDir();
    if (pg->bin_.empty()) {
      *error = "no /usr/lib/postgresql/*/bin/initdb: install postgresql-15";
      return nullptr;
    }
    const std::string data = pg->dir_ / "data";
    if (geteuid() == 0) {
      std::filesystem::permissions(pg->dir_.path(), std::filesystem::perms::all);
      pg->as_ = {"/usr/sbin/runuser", "-u", "postgres", "--"};
    }
    if (!pg->MakeData(data, error)) return nullptr;
    pg->port_ = FreeLoopbackPort();
    const std::string opts = "-c listen_addresses=127.0.0.1 -p " + std::to_string(pg->port_) +
                             " -k " + pg->dir_.path().string() + " -c fsync=off";
    Ran start = pg->Run({pg->bin_ + "/pg_ctl", "-D", data, "-o", opts, "-l", pg->dir_ / "log", "-w",
                         "-t", "60", "start"});
    if (start.exit_code != 0) {
      *error = "pg_ctl start failed: " + start.err + ReadFile(pg->dir_ / "log");
      return nullptr;
    }
    pg->started_ = true;
    return pg;
  }

  ~LocalPostgres() {
    if (started_) Run({bin_ + "/pg_ctl", "-D", dir_ / "data", "-m", "immediate", "-w", "stop"});
  }

  // A new empty database's URL; "" (and `error`) when createdb failed.
  std::string NewDatabase(const std::string& name, std::string* error) {
    Ran made =
        Run({bin_ + "/createdb", "-h", "127.0.0.1", "-p", std::to_string(port_), "-U", "hp", name});
    if (made.exit_code != 0) {
      *error = "createdb failed: " + made.err;
      return "";
    }
    return "postgresql://hp@127.0.0.1:" + std::to_string(port_) + "/" + name;
  }

  // Runs `sql` in database `name` with psql; its exit code and output.
  Ran Sql(const std::string& name, const std::string& sql) {
    return Run({bin_ + "/psql", "-h", "127.0.0.1", "-p", std::to_string(port_), "-U", "hp", "-d",
                name, "-v", "ON_ERROR_STOP=1", "-At", "-c", sql});
  }

  int port() const { return port_; }

 private:
  LocalPostgres() = default;

  // A new cluster in `data`: a copy of the one initdb made for the first server of this build (its
  // template, beside the test programs), or, for that first server, initdb's own. initdb took 1.5 s
  // of CPU, a copy 0.2 s, and a test run starts about 30 servers. The template is moved into place
  // whole by rename, so a test that runs beside the first sees all of it or none (and makes its
  // own; the loser of that race drops its copy).
  bool MakeData(const std::string& data, std::string* error) {
    const std::filesystem::path tmpl =
        std::filesystem::path(HYPERPACK_TEST_BINARY_DIR) /
        ("postgres-" + std::filesystem::path(bin_).parent_path().filename().string());
    if (std::filesystem::exists(tmpl / "data")) return Copy((tmpl / "data").string(), data, error);
    Ran init = Run({bin_ + "/initdb", "-D", data, "-U", "hp", "--auth=trust", "-E", "UTF8",
                    "--no-sync", "--locale=C"});
    if (init.exit_code != 0) {
      *error = "initdb failed: " + init.err;
      return false;
    }
    const std::string staging = tmpl.string() + ".new-" + std::to_string(getpid());
    std::error_code ec;
    std::filesystem::create_directories(staging, ec);
    std::string unused;
    if (!ec && Copy(data, staging + "/data", &unused))
      std::filesystem::rename(staging, tmpl, ec);  // fails where another test's came first
    std::filesystem::remove_all(staging, ec);
    return true;
  }

  // cp -a: ownership (the server's user) and modes kept, as PostgreSQL requires of its data.
  static bool Copy(const std::string& from, const std::string& to, std::string* error) {
    Ran copied = RunCommand({"/bin/cp", "-a", from, to});
    if (copied.exit_code != 0) *error = "cp -a " + from + " " + to + ": " + copied.err;
    return copied.exit_code == 0;
  }

  // The newest installed version's programs.
  static std::string BinDir() {
    std::string best;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
      const std::string bin = (e.path() / "bin").string();
      if (std::filesystem::exists(bin + "/initdb") && bin > best) best = bin;
    }
    return best;
  }

  Ran Run(std::vector<std::string> argv) {
    argv.insert(argv.begin(), as_.begin(), as_.end());
    return RunCommand(argv, dir_.path().string());
  }

  TempDir dir_;
  std::string bin_;
  std::vector<std::string> as_;  // the prefix that drops root
  int port_ = 0;
  bool started_ = false;
};

}  // namespace hyperpack::testing
