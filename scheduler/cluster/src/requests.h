// The server's side of remote.h: a request frame carried out against the server's storage, as the
// same call on the server's machine would be, and the reply frame that answers it.
// Thread-safety: HandleRequest opens its own storage handle and may run on any thread (the server
// runs it on a pool of its own); it may block while a study's runner answers a control.
#pragma once

#include <string>

#include "protocol.h"

namespace hyperpack::scheduler {

protocol::Reply HandleRequest(const std::string& storage_url, const protocol::Request& request);

}  // namespace hyperpack::scheduler
