// The command line's shared pieces: exit codes, flag parsing, storage and the commands themselves
// (one file per family: cmd_run.cc runs studies, servers and agents; cmd_study.cc imports and
// validates study files; cmd_read.cc prints and exports what a study stored; cmd_simulate.cc
// replays workloads). main.cc holds the command table that prints the usage and dispatches.
// Thread-safety: each command runs on the main thread.
#pragma once

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cxxopts.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hyperpack/dashboard/dashboard.h"
#include "hyperpack/env_vars.h"
#include "hyperpack/placement/simulate.h"
#include "hyperpack/report/optuna.h"
#include "hyperpack/report/report.h"
#include "hyperpack/scheduler/ask_tell.h"
#include "hyperpack/scheduler/remote.h"
#include "hyperpack/scheduler/runner.h"
#include "hyperpack/scheduler/serve.h"
#include "hyperpack/scheduler/slurm.h"
#include "hyperpack/status.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/study/import.h"
#include "hyperpack/study/spec.h"
#include "hyperpack/text.h"

namespace hyperpack::cli {

using hyperpack::Result;
using hyperpack::Status;
using hyperpack::StatusCode;
namespace report = hyperpack::report;
namespace study = hyperpack::study;
namespace tuner = hyperpack::tuner;
constexpr int kOk = 0;
constexpr int kFailure = 1;
constexpr int kUsage = 2;

// A whole file, or why it cannot be read; `what` names it for the message.
Result<std::string> ReadFileText(const std::string& path, const std::string& what);

int Fail(const Status& s);

std::string StoragePath(const cxxopts::ParseResult& args);

void AddStorage(cxxopts::Options& o);
// --server and --token-file: a study in the storage of hyperpack serve, asked through it.
void AddServer(cxxopts::Options& o);
// --tls-ca, --tls-cert, --tls-key, --tls-crl and --insecure (credentials.h).
void AddTls(cxxopts::Options& o);

// Parses argv for one subcommand; prints help or a usage error and returns an exit code when
// the command should not go on.
std::optional<int> Parse(cxxopts::Options& options, int argc, char** argv,
                         cxxopts::ParseResult* out, int positional_min, int positional_max);

std::vector<std::string> Positional(const cxxopts::ParseResult& args);
// A string option's value; empty when it was not given.
std::string OptionalString(const cxxopts::ParseResult& args, const char* name);

hyperpack::Result<std::unique_ptr<hyperpack::storage::Storage>> OpenForReading(
    const cxxopts::ParseResult& args);

report::OutputFormat Format(const cxxopts::ParseResult& args);

// The shared secret of serve, agent and run --server, from --token-file.
hyperpack::Result<std::string> Token(const cxxopts::ParseResult& args);
// --token-file and the TLS flags (AddTls) of a cluster command.
hyperpack::Result<hyperpack::scheduler::Credentials> ClusterCredentials(
    const cxxopts::ParseResult& args);

// --from: another tool's file format, or nullopt for auto (told from the file).
hyperpack::Result<std::optional<study::SweepFormat>> SweepFormatArg(
    const cxxopts::ParseResult& args);

// --command: the trial's command in place of another tool's file's.
study::ImportOptions ImportOptionsArg(const cxxopts::ParseResult& args);

// The options of a run on this machine (or on Slurm) from run's flags, but its budget.
Result<hyperpack::scheduler::RunOptions> LocalRunOptions(const cxxopts::ParseResult& args);
// --fake-gpu-memory MIB (0 when not given); an error without --fake-gpus or out of range.
Result<int64_t> FakeGpuMemory(const cxxopts::ParseResult& args);

int CmdRun(int argc, char** argv);

// `hyperpack slurm-task COMMAND`: each task of a trial's Slurm job (written into its job script).
int CmdSlurmTask(int argc, char** argv);

int CmdServe(int argc, char** argv);

int CmdAgent(int argc, char** argv);

int CmdImport(int argc, char** argv);

int CmdValidate(int argc, char** argv);
int CmdCreate(int argc, char** argv);
int CmdAsk(int argc, char** argv);
int CmdTell(int argc, char** argv);
int CmdHeartbeat(int argc, char** argv);

int CmdStop(int argc, char** argv);
int CmdCancel(int argc, char** argv);
int CmdPause(int argc, char** argv);
int CmdResume(int argc, char** argv);
int CmdUpdate(int argc, char** argv);
int CmdEnqueue(int argc, char** argv);
int CmdRetry(int argc, char** argv);
int CmdAddResults(int argc, char** argv);
int CmdDelete(int argc, char** argv);
int CmdWait(int argc, char** argv);
int CmdLogs(int argc, char** argv);

int CmdStatus(int argc, char** argv);

int CmdTrials(int argc, char** argv);

int CmdBest(int argc, char** argv);

int CmdExport(int argc, char** argv);

int CmdDashboard(int argc, char** argv);

int CmdReport(int argc, char** argv);

int CmdSimulate(int argc, char** argv);

}  // namespace hyperpack::cli
