#!/usr/bin/env bash
# Checks every Kubernetes manifest of this folder offline against the API schemas, with the
# PyPI package kubernetes-validate (installed when missing): the plain manifests, the two
# ConfigMaps kustomization.yaml generates, and the Job manifests driver.sh creates at run
# time (driver.sh --print, for a few settings). Exits non-zero when any does not validate.
#   K8S_VERSIONS="1.33.0 1.37.0" ./validate.sh
set -euo pipefail
cd "$(dirname "$0")"

# backoffLimitPerIndex and podFailurePolicy's FailIndex are GA from Kubernetes 1.33.
versions=${K8S_VERSIONS:-1.33.0 1.37.0}

if ! command -v kubernetes-validate >/dev/null 2>&1; then
    echo "installing kubernetes-validate from PyPI"
    python3 -m pip install --quiet kubernetes-validate 2>/dev/null ||
        python3 -m pip install --quiet --break-system-packages kubernetes-validate
    hash -r
fi
command -v kubernetes-validate >/dev/null 2>&1 || { echo "kubernetes-validate not installable" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The ConfigMaps that kustomization.yaml's configMapGenerator makes (JSON is YAML).
python3 - "$tmp/configmaps.yaml" <<'PY'
import json, sys
out = []
for name, files in (("winback-pipeline", ["pipeline.yaml"]), ("winback-driver", ["driver.sh"])):
    data = {f: open(f, encoding="utf-8").read() for f in files}
    out.append(json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": name, "namespace": "winback",
                                        "labels": {"app.kubernetes.io/name": "winback"}},
                           "data": data}))
open(sys.argv[1], "w").write("\n---\n".join(out) + "\n")
PY

# The Jobs driver.sh creates, with the CronJob's defaults and with other N, M and limits.
WINBACK_IMAGE=registry.example.com/winback:1.0.0 WINBACK_RUN_ID=20261124-053000 \
    bash driver.sh --print >"$tmp/jobs-default.yaml"
WINBACK_IMAGE=registry.example.com/winback:1.0.0 WINBACK_RUN_ID=manual-1 WINBACK_SHARDS=64 \
    WINBACK_TASKS=1 WINBACK_MAX_PARALLEL=10 WINBACK_MEMORY=6Gi WINBACK_CPU=2 \
    WINBACK_RETRIES_PER_INDEX=0 bash driver.sh --print >"$tmp/jobs-other.yaml"

manifests=()
for f in *.yaml; do
    case $f in
        kustomization.yaml | pipeline.yaml) ;; # not Kubernetes objects
        *) manifests+=("$f") ;;
    esac
done
manifests+=("$tmp/configmaps.yaml" "$tmp/jobs-default.yaml" "$tmp/jobs-other.yaml")

status=0
for v in $versions; do
    if kubernetes-validate --kubernetes-version "$v" --strict --quiet "${manifests[@]}"; then
        echo "ok: ${#manifests[@]} files validate against Kubernetes $v (strict)"
    else
        echo "FAILED: Kubernetes $v" >&2
        status=1
    fi
done

# Where kubectl is at hand, the kustomization as it will be applied, too.
if command -v kubectl >/dev/null 2>&1; then
    if kubectl kustomize . >"$tmp/kustomized.yaml"; then
        for v in $versions; do
            kubernetes-validate --kubernetes-version "$v" --strict --quiet "$tmp/kustomized.yaml" || status=1
        done
        python3 - "$tmp/kustomized.yaml" <<'PY' || status=1
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == "CronJob":
        c = d["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in c["env"]}
        if env["WINBACK_IMAGE"] != c["image"]:
            sys.exit(f"WINBACK_IMAGE {env['WINBACK_IMAGE']} is not the driver's image {c['image']}")
PY
        echo "ok: kubectl kustomize output validates; the task pods get the driver's image"
    else
        echo "FAILED: kubectl kustomize" >&2
        status=1
    fi
else
    echo "kubectl not installed: the kustomization itself was not built"
fi

if command -v shellcheck >/dev/null 2>&1; then
    shellcheck driver.sh validate.sh || status=1
fi
exit "$status"
