#!/usr/bin/env bash
# What deploy/Dockerfile and deploy/compose.yaml do, run without docker (for a machine with
# no docker daemon or no registry to pull a base image from):
#   bash deploy/check.sh [WORKDIR]
# 1. the image's build: deploy/install.sh into WORKDIR/kgrag, its models loaded once;
# 2. the image run with no network (`docker run --network none`): in a network namespace
#    holding only loopback (unshare, as root), build a graph from examples/ and serve it
#    over HTTP; /ready and a retrieve must answer, with nothing fetched;
# 3. the compose pair: a Neo4j with a password (the project's launcher standing in for the
#    neo4j service), the graph copied into it, kgrag serving it with the password from a
#    file (KGRAG_NEO4J_PASSWORD_FILE) and an access file; /ready, a retrieve with the
#    token, 401 without; then SIGTERM, and the exit status must be 0.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-$(mktemp -d)}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
KG="$WORK/kgrag"
say() { printf '\n== %s\n' "$*"; }

say "1. build: deploy/install.sh into $KG"
[ -x "$KG/bin/kgrag" ] || sh "$ROOT/deploy/install.sh" "$ROOT" "$KG"
export XDG_CACHE_HOME="$KG/cache" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

serve_and_ask() {  # $1: graph spec; $2: curl auth header or ""; prints the server's base URL
    local log="$WORK/serve.log"
    "$KG/bin/kgrag" serve --graph "$1" --http 127.0.0.1:0 --no-explorer ${3:-} 2> "$log" &
    local pid=$!
    for _ in $(seq 600); do
        grep -q "serving RCP/1 on" "$log" 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || { cat "$log"; return 1; }
        sleep 0.2
    done
    local base
    base=$(grep -o "http://[0-9.]*:[0-9]*" "$log" | head -1)
    curl -sf ${2:+-H "$2"} "$base/ready"; echo
    curl -sf ${2:+-H "$2"} "$base/rcp/initialize" -d '{"jsonrpc":"2.0","id":0,"method":
        "initialize","params":{"protocolVersion":1,"client":{"name":"check","version":"1"}}}' \
        > /dev/null
    curl -sf ${2:+-H "$2"} -H 'Content-Type: application/json' "$base/rcp/retrieve" -d \
        '{"jsonrpc":"2.0","id":1,"method":"retrieve","params":{"query":"Harris W. Fawell","k":1}}' \
        | grep -q '"hits":\[{' || { echo "no hit"; kill "$pid"; return 1; }
    if [ -n "${2:-}" ]; then
        code=$(curl -s -o /dev/null -w '%{http_code}' "$base/rcp/ping" -d '{}')
        [ "$code" = 401 ] || { echo "no token, yet $code"; kill "$pid"; return 1; }
    fi
    kill -TERM "$pid"
    wait "$pid"  # set -e: a non-zero exit fails the check
    echo "served $1, answered, stopped cleanly"
}

say "2. run with no network: a graph from examples/, served and asked"
if [ "$(id -u)" = 0 ] && unshare --net true 2>/dev/null; then
    export -f serve_and_ask
    export KG WORK ROOT
    unshare --net bash -euo pipefail -c '
        ip link set lo up
        ! curl -s -m 3 -o /dev/null https://pypi.org  # nothing but loopback here
        "$KG/bin/kgrag" ingest "$ROOT/examples/corpus.json" --graph "$WORK/graph" --quiet
        serve_and_ask "demo=$WORK/graph" ""'
else
    echo "(not root, or no network namespaces: run without cutting the network off)"
    "$KG/bin/kgrag" ingest "$ROOT/examples/corpus.json" --graph "$WORK/graph" --quiet
    serve_and_ask "demo=$WORK/graph" ""
fi

say "3. compose: Neo4j with a password, kgrag serving the graph from it behind tokens"
PASSWORD=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s' "$PASSWORD" > "$WORK/neo4j_password"
TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
DIGEST=$(printf '%s' "$TOKEN" | sha256sum | cut -d' ' -f1)
printf '[{"sha256": "%s", "graphs": ["wiki"], "rights": ["read"]}]' "$DIGEST" > "$WORK/access.json"
URI=$("$ROOT/.venv/bin/python" - "$WORK/neo4j" "$PASSWORD" "$ROOT/neo4j/launcher.py" <<'PY'
import importlib.util, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("launcher", sys.argv[3])
launcher = importlib.util.module_from_spec(spec); spec.loader.exec_module(launcher)
print(launcher.start(Path(sys.argv[1]), password=sys.argv[2], heap_mib=768)[1])
PY
)
trap '"$ROOT/.venv/bin/python" "$ROOT/neo4j/launcher.py" stop "$WORK/neo4j" > /dev/null' EXIT
export KGRAG_NEO4J_USER=neo4j KGRAG_NEO4J_PASSWORD_FILE="$WORK/neo4j_password"
"$KG/bin/kgrag" ingest "$ROOT/examples/corpus.json" --graph "$URI/wiki" --quiet
serve_and_ask "wiki=$URI/wiki" "Authorization: Bearer $TOKEN" "--access-file $WORK/access.json"
say "deploy check passed ($WORK)"
