#!/usr/bin/env bash
# A Flower deployment of examples/flower on 127.0.0.1, end to end:
#
# * TLS certificates generated on the spot (openssl: a CA, and a SuperLink
#   certificate for 127.0.0.1);
# * one SuperLink (TLS) and 3 SuperNodes (verifying it against the CA), each
#   node with a persistent X25519 key (cepam-key-file, mode 0600) and a
#   context state file (cepam-state); the server pins the nodes' keys on
#   first use (pinned-keys);
# * the app run to the end with key agreement; once round 2 has started, one
#   SuperNode is killed (SIGKILL) and restarted with the same key and state;
# * checks: the run finished every round, each round averaged at least 2
#   updates, and the restarted node's replies were accepted again.
#
# Needs: flwr, cepam (flower and fl extras) and torch in the Python on PATH,
# openssl, and the MNIST folder in CEPAM_DATA.  Usage:
#   CEPAM_DATA=/path/to/mnist examples/flower/deploy_local.sh [rounds]
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DATA=${CEPAM_DATA:?set CEPAM_DATA to the MNIST folder}
ROUNDS=${1:-5}
PORT=${CEPAM_DEPLOY_PORT:-18123}
WORK=$(mktemp -d)
export FLWR_HOME=$WORK/flwr
PIDS=()

cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
say() { echo "[deploy $(date +%H:%M:%S)] $*"; }

say "certificates in $WORK"
cd "$WORK"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -subj "/CN=cepam deploy test CA" -keyout ca.key -out ca.crt 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/CN=127.0.0.1" -keyout server.key -out server.csr 2>/dev/null
printf "subjectAltName=IP:127.0.0.1,DNS:localhost\n" > san.ext
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 \
    -extfile san.ext -out server.pem 2>/dev/null

say "SuperLink on 127.0.0.1:$PORT (TLS)"
flower-superlink --ssl-ca-certfile ca.crt --ssl-certfile server.pem --ssl-keyfile server.key \
    --host 127.0.0.1 --port "$PORT" --database "$WORK/state.db" \
    --disable-runtime-dependency-installation > superlink.log 2>&1 &
PIDS+=($!)

start_node() {  # partition
    local i=$1
    flower-supernode --root-certificates ca.crt --superlink "127.0.0.1:$PORT" \
        --port $((PORT + 10 + i)) --max-retries 100 \
        --node-config "partition-id=$i num-partitions=3 cepam-key-file='$WORK/node$i.key' cepam-state='$WORK/node$i.state'" \
        >> "node$i.log" 2>&1 &
    NODE_PID[$i]=$!
    PIDS+=($!)
}
declare -a NODE_PID
for i in 0 1 2; do start_node "$i"; done
say "SuperNodes started: pids ${NODE_PID[*]}"

mkdir -p "$FLWR_HOME"
cat > "$FLWR_HOME/config.toml" <<EOF
[superlink]
default = "deploy"

[superlink.deploy]
address = "127.0.0.1:$PORT"
root-certificates = "$WORK/ca.crt"
EOF

for _ in $(seq 120); do  # until the SuperLink answers over TLS
    flwr ls deploy > /dev/null 2>&1 && break
    sleep 1
done
say "flwr run: $ROUNDS rounds, 3 nodes, X25519 keys pinned in $WORK/pins.json"
flwr run "$ROOT/examples/flower" deploy --stream --run-config \
    "data-dir='$DATA' num-server-rounds=$ROUNDS min-nodes=3 num-clients=3 pinned-keys='$WORK/pins.json'" \
    > run.log 2>&1 &
RUN=$!
echo "$RUN" > run.pid
PIDS+=($RUN)

# Kill one SuperNode once round 2 has started, then bring it back.
for _ in $(seq 600); do
    grep -q "\[ROUND 2/" run.log 2>/dev/null && break
    kill -0 "$RUN" 2>/dev/null || break
    sleep 1
done
say "round 2 started: killing SuperNode 1 (pid ${NODE_PID[1]}, SIGKILL)"
kill -9 "${NODE_PID[1]}"
sleep 3
start_node 1
say "SuperNode 1 restarted (pid ${NODE_PID[1]}), same key and state files"

wait "$RUN" || { say "flwr run failed"; tail -50 run.log; exit 1; }

grep -E "Aggregated MetricRecord|\[ROUND|dropped the reply|cepam: [0-9]+ rounds released" run.log \
    | sed -e 's/\x1b\[[0-9;]*m//g' -e 's/^INFO *: *//' -e 's/^WARNING *: *//'
summary=$(grep -E "cepam: [0-9]+ rounds released" run.log | tail -1)
released=$(echo "$summary" | sed -E 's/.*cepam: ([0-9]+) rounds released.*/\1/')
say "pinned keys: $(python -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$WORK/pins.json") nodes"
if [ "$released" != "$ROUNDS" ]; then
    say "FAILED: $released of $ROUNDS rounds released"
    exit 1
fi
last=$(grep -E "Aggregated MetricRecord: \{.*cepam-updates" run.log | tail -1 \
       | sed -E "s/.*'cepam-updates': ([0-9]+).*/\1/")
if [ "$last" != "3" ]; then
    say "FAILED: the last round averaged $last updates, not 3 (the restarted node is missing)"
    exit 1
fi
say "OK: $ROUNDS rounds over TLS, the restarted SuperNode's updates accepted again"
