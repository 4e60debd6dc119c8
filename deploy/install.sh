#!/bin/sh
# The one install of retrieval-fabric with its embedder, shared by the Makefile, the Dockerfile and CI's wheel check.
#
#   deploy/install.sh PYTHON REQUIREMENT...
#
# torch's CPU build comes first, pinned (a plain `torch`, asked for by sentence-transformers, pulls a multi-GB CUDA
# build); TORCH_INDEX_URL names an index serving that CPU build when the default index does not (the image's build).
# Then pip installs the requirements as given: '-e .[embeddings,dev]' in a checkout, 'dist/x.whl[embeddings]' for a
# built wheel.
set -eu
python="$1"
shift
if [ -n "${TORCH_INDEX_URL:-}" ]; then
  "$python" -m pip install -q --index-url "$TORCH_INDEX_URL" torch==2.13.0
else
  "$python" -m pip install -q torch==2.13.0
fi
"$python" -m pip install -q "$@"
