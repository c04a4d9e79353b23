#!/usr/bin/env bash
# Prepares, on this Debian machine, what bench/gpu_check.sh needs on a GPU machine that has a CUDA
# torch but none of Debian's -dev packages, in one folder to travel beside the tree:
#
#   [GLOO_SOURCE=DIR] bench/gpu_carry.sh CARRY [CLI]
#
# CARRY/headers     nlohmann-json, cxxopts and zlib's headers (header-only or headers alone), and
#                   with GLOO_SOURCE (a checkout of github.com/pytorch/gloo) gloo's headers and a
#                   config.h as a CUDA torch builds it: Python's torch ships c10d's
#                   ProcessGroupGloo.hpp but not the gloo headers it includes, and Debian's
#                   libgloo-dev (2022) lacks the Store calls that header overrides;
# CARRY/googletest  Debian's GoogleTest sources (/usr/src/googletest), built there;
# CARRY/fmnist      Fashion-MNIST's first 30,000 training images and labels and the test set;
# CARRY/bin         the hyperpack CLI (default build/cli/hyperpack), stripped;
# CARRY/lib         the shared libraries the CLI needs beyond glibc, libstdc++, zlib and OpenSSL.
set -euo pipefail
carry="$(realpath -m "${1:?CARRY folder}")"
cli="${2:-build/cli/hyperpack}"
rm -rf "$carry"
mkdir -p "$carry"/{headers,bin,lib,fmnist}
cp -r /usr/include/nlohmann /usr/include/cxxopts.hpp /usr/include/zlib.h /usr/include/zconf.h \
  "$carry/headers/"
cp -r /usr/src/googletest "$carry/googletest"
if [[ -n "${GLOO_SOURCE:-}" ]]; then
  (cd "$GLOO_SOURCE" && find gloo -name '*.h' -exec cp --parents {} "$carry/headers" \;)
  cat >"$carry/headers/gloo/config.h" <<'H'
#pragma once
#define GLOO_VERSION_MAJOR 0
#define GLOO_VERSION_MINOR 5
#define GLOO_VERSION_PATCH 0
#define GLOO_VERSION (GLOO_VERSION_MAJOR * 10000 + GLOO_VERSION_MINOR * 100 + GLOO_VERSION_PATCH)
#define GLOO_USE_CUDA 1
#define GLOO_USE_NCCL 0
#define GLOO_USE_ROCM 0
#define GLOO_USE_RCCL 0
#define GLOO_USE_REDIS 0
#define GLOO_USE_IBVERBS 0
#define GLOO_USE_MPI 0
#define GLOO_USE_AVX 0
#define GLOO_USE_LIBUV 0
#define GLOO_HAVE_TRANSPORT_TCP 1
#define GLOO_HAVE_TRANSPORT_TCP_TLS 0
#define GLOO_HAVE_TRANSPORT_IBVERBS 0
#define GLOO_HAVE_TRANSPORT_UV 0
#define GLOO_USE_TORCH_DTYPES 1
H
fi
strip -o "$carry/bin/hyperpack" "$cli"
ldd "$cli" | awk '/=> \// {print $3}' |
  grep -E 'prometheus|yaml-cpp|civetweb|sqlite3' | xargs -I{} cp -L {} "$carry/lib/"
/usr/bin/python3 - "$carry/fmnist" <<'PY'
import gzip, shutil, struct, sys
src, dst = "/usr/share/datasets/fashion-mnist", sys.argv[1]
keep = 30000
for stem, row in (("train-images-idx3-ubyte", 784), ("train-labels-idx1-ubyte", 1)):
    data = gzip.open("%s/%s.gz" % (src, stem)).read()
    dims = data[3]
    header = bytearray(data[:4 + 4 * dims])
    header[4:8] = struct.pack(">I", keep)
    with gzip.open("%s/%s.gz" % (dst, stem), "wb", compresslevel=6) as f:
        f.write(bytes(header) + data[4 + 4 * dims:4 + 4 * dims + keep * row])
for stem in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
    shutil.copy("%s/%s.gz" % (src, stem), dst)
PY
du -sh "$carry"
