// The lifecycle verbs, wait, logs, ask and tell through `hyperpack serve`: for a study in the
// server's storage, which a client on another machine cannot open. One connection a request:
// connect (trying a server and its standbys in turn), prove the token, send the request frame,
// read the reply. The server carries the request out as the same call on this machine would
// (control.h, report.h, ask_tell.h), on a pool of its own, so its io thread never waits.
// Thread-safety: each call runs its own io_context on the calling thread until it returns.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hyperpack/report/report.h"
#include "hyperpack/scheduler/ask_tell.h"
#include "hyperpack/scheduler/control.h"
#include "hyperpack/scheduler/credentials.h"
#include "hyperpack/status.h"

namespace hyperpack::scheduler {

// `server`: HOST:PORT, or HOST:PORT,HOST:PORT,...; errors are the server's (a study it does not
// have: kNotFound, ...), or kIo when no server could be reached or it does not take requests.
Result<ControlAnswer> RemoteControl(const std::string& server, const Credentials& credentials,
                                    const ControlRequest& request);
Result<std::vector<report::StudyCondition>> RemoteConditions(const std::string& server,
                                                             const Credentials& credentials,
                                                             const std::string& study);
Result<report::LogChunk> RemoteLogs(const std::string& server, const Credentials& credentials,
                                    const std::string& study, std::optional<int> trial,
                                    int64_t from);
Result<AskedTrial> RemoteAsk(const std::string& server, const Credentials& credentials,
                             const std::string& study);
Status RemoteTell(const std::string& server, const Credentials& credentials,
                  const std::string& study, int number, const Tell& tell);
Status RemoteHeartbeat(const std::string& server, const Credentials& credentials,
                       const std::string& study, int number);

}  // namespace hyperpack::scheduler
