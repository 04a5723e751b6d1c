#!/usr/bin/env sh
# The steps that make a kgrag server, shared by the container image (deploy/Dockerfile) and
# the check that runs them without docker (deploy/check.sh):
#   deploy/install.sh SOURCE PREFIX
# installs kgrag from the checkout SOURCE into a virtual environment at PREFIX (torch's CPU
# wheel first, then the package), then loads every model once so that nothing is fetched
# when the server runs: the embedding model's ONNX export is written into PREFIX/cache.
set -eu
SOURCE=$(cd "$1" && pwd)
PREFIX=$2
python3 -m venv "$PREFIX"
"$PREFIX/bin/python" -m pip install -q --upgrade pip
"$PREFIX/bin/python" -m pip install -q torch==2.13.0
"$PREFIX/bin/python" -m pip install -q "$SOURCE"
mkdir -p "$PREFIX/cache"
# a two-passage graph built and asked once: spaCy, the encoder and its ONNX export load
WARM=$(mktemp -d)
printf '%s' '[{"title": "Ada", "text": "Ada Lovelace wrote the first program in London."},
 {"title": "London", "text": "London is the capital of England."}]' > "$WARM/warm.json"
export XDG_CACHE_HOME="$PREFIX/cache" HF_HUB_OFFLINE=1
"$PREFIX/bin/kgrag" ingest "$WARM/warm.json" --graph "$WARM/graph" --quiet
"$PREFIX/bin/kgrag" query --graph "$WARM/graph" -k 1 "Where did Ada Lovelace write?" > /dev/null
rm -rf "$WARM"
echo "kgrag installed in $PREFIX, its models loaded once"
