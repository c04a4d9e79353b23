// The stored-study half of hyperpack._hyperpack (study.cc), bound beside the tuner (module.cc).
// Thread-safety: see study.cc.
#pragma once

#include <pybind11/pybind11.h>

namespace hyperpack::python {

void BindStudy(pybind11::module_& m);

}  // namespace hyperpack::python
