#!/usr/bin/env python3
"""Checks the AWS Batch files of this folder offline; exits non-zero on any problem.

- job-definition.json against the RegisterJobDefinition request shape, and
  submit-partition.json, submit-shard.json, submit-merge.json and the requests submit.sh
  makes (submit.sh --dry-run, for several N and M) against the SubmitJob request shape, with
  botocore's own service model for batch (botocore.validate.validate_parameters);
- then what the shapes cannot say: a container job whose command names only parameters that
  have a value, an EFS volume mounted by the container, the three stages wired together
  (array sizes, dependencies on whole jobs, the same pipeline, work folder and N everywhere).
"""

import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
problems = []


def problem(where, message):
    problems.append(f"{where}: {message}")


def load(name):
    with open(os.path.join(HERE, name), encoding="utf-8") as f:
        return json.load(f)


def batch_model():
    try:
        import botocore.session
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "botocore"], check=False)
        import botocore.session
    return botocore.session.get_session().get_service_model("batch")


def check_shape(model, operation, params, where):
    import botocore.exceptions
    import botocore.validate

    try:
        botocore.validate.validate_parameters(params, model.operation_model(operation).input_shape)
    except botocore.exceptions.ParamValidationError as error:
        problem(where, f"not a valid {operation} request: {error}")


def expect(where, condition, message):
    if not condition:
        problem(where, message)


def check_definition(d, where="job-definition.json"):
    expect(where, d.get("type") == "container", "type must be container")
    props = d.get("containerProperties")
    if not isinstance(props, dict):
        problem(where, "containerProperties missing")
        return set()
    expect(where, isinstance(props.get("image"), str) and props["image"], "containerProperties.image missing")
    command = props.get("command")
    expect(where, isinstance(command, list) and all(isinstance(a, str) for a in command), "command must be a list of strings")
    command = command or []
    expect(where, command[:1] == ["winback"], "the command must run winback")
    refs = {a[len("Ref::"):] for a in command if a.startswith("Ref::")}
    expect(where, {"stage", "pipeline", "work", "shards"} <= refs, "the command must use Ref::stage, Ref::pipeline, Ref::work and Ref::shards")
    defaults = d.get("parameters", {})
    for ref in sorted(refs - set(defaults)):
        problem(where, f"Ref::{ref} has no default in parameters")
    kinds = {r.get("type"): r.get("value") for r in props.get("resourceRequirements", [])}
    expect(where, "VCPU" in kinds and "MEMORY" in kinds, "resourceRequirements needs VCPU and MEMORY")
    if str(kinds.get("MEMORY", "")).isdigit():
        expect(where, int(kinds["MEMORY"]) >= 512, "MEMORY is in MiB: 512 at least")
    volumes = {v.get("name"): v for v in props.get("volumes", [])}
    efs = [n for n, v in volumes.items() if "efsVolumeConfiguration" in v]
    expect(where, efs, "an EFS volume (efsVolumeConfiguration) for the shared work folder is missing")
    for n in efs:
        fs = volumes[n]["efsVolumeConfiguration"].get("fileSystemId", "")
        expect(where, re.fullmatch(r"fs-[0-9a-f]{8,17}", fs), f"volume {n}: fileSystemId {fs!r} is not fs-…")
    mounts = props.get("mountPoints", [])
    for m in mounts:
        expect(where, m.get("sourceVolume") in volumes, f"mount point {m.get('containerPath')} names no volume")
    shared = [m["containerPath"] for m in mounts if m.get("sourceVolume") in efs and not m.get("readOnly")]
    expect(where, shared, "the EFS volume must be mounted read-write")
    for name in ("pipeline", "work"):
        value = defaults.get(name, "")
        expect(where, any(value.startswith(p.rstrip("/") + "/") for p in shared), f"parameters.{name} {value!r} is not on the EFS mount")
    retry = d.get("retryStrategy", {})
    expect(where, len(retry.get("evaluateOnExit", [])) <= 5, "retryStrategy.evaluateOnExit takes 5 rules at most")
    return refs


def check_run(requests, definition, refs, where):
    """requests: {stage: SubmitJob request}; N and M from the requests themselves."""
    part, shard, merge = requests["partition"], requests["shard"], requests["merge"]
    values = {}
    for stage, r in requests.items():
        w = f"{where} {stage}"
        expect(w, r.get("jobDefinition", "").split(":")[0] == definition["jobDefinitionName"], "jobDefinition is not the job definition's name")
        expect(w, r.get("jobQueue"), "jobQueue missing")
        expect(w, re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}", r.get("jobName", "")), "jobName: 1-128 letters, digits, - and _")
        params = {**definition.get("parameters", {}), **r.get("parameters", {})}
        for ref in sorted(refs - set(params)):
            problem(w, f"no value for Ref::{ref}")
        values[stage] = (params.get("pipeline"), params.get("work"), params.get("shards"))
        size = r.get("arrayProperties", {}).get("size")
        expect(w, size is None or 2 <= size <= 10000, f"arrayProperties.size {size} is outside 2..10000")
        for dep in r.get("dependsOn", []):
            expect(w, dep.get("type") in (None, "SEQUENTIAL") and dep.get("type") != "N_TO_N", "a dependency must be on the whole job, not N_TO_N")
    expect(where, len(set(values.values())) == 1, f"the stages differ in pipeline, work or shards: {values}")
    pipeline, work, shards = values["partition"]
    n = int(shards)
    expect(f"{where} partition", "dependsOn" not in part, "the partition job depends on nothing")
    expect(f"{where} shard", len(shard.get("dependsOn", [])) == 1, "the shard job depends on the partition job")
    expect(f"{where} merge", len(merge.get("dependsOn", [])) == 1, "the merge job depends on the shard job")
    expect(f"{where} merge", "arrayProperties" not in merge, "the merge job is one job, not an array")
    expect(f"{where} merge", merge.get("parameters", {}).get("stage") == "merge", "parameters.stage must be merge")
    expect(f"{where} shard", shard.get("parameters", {}).get("stage") == "run", "parameters.stage must be run")
    shard_size = shard.get("arrayProperties", {}).get("size", 1)
    expect(f"{where} shard", shard_size == n, f"array size {shard_size} is not N = {n}")
    if shard_size == 1:
        command = shard.get("containerOverrides", {}).get("command", [])
        expect(f"{where} shard", command[-2:] == ["--shard", "0"], "one shard without an array needs --shard 0")
    command = part.get("containerOverrides", {}).get("command", [])
    expect(f"{where} partition", command[:3] == ["winback", "partition", pipeline], "the command override must be winback partition PIPELINE …")
    if "--tasks" in command and command.index("--tasks") + 1 < len(command):
        m = int(command[command.index("--tasks") + 1])
        size = part.get("arrayProperties", {}).get("size", 1)
        expect(f"{where} partition", size == m, f"array size {size} is not M = {m} (--tasks)")
        if m == 1:
            expect(f"{where} partition", command[-2:] == ["--task", "0"], "one partition task without an array needs --task 0")
    else:
        problem(f"{where} partition", "the command override lacks --tasks M")
    for flag, value in (("--work", work), ("--shards", shards)):
        expect(f"{where} partition", flag in command and command[command.index(flag) + 1] == value, f"{flag} differs from the parameters")


def main():
    model = batch_model()
    definition = load("job-definition.json")
    check_shape(model, "RegisterJobDefinition", definition, "job-definition.json")
    refs = check_definition(definition)

    files = {stage: load(f"submit-{stage}.json") for stage in ("partition", "shard", "merge")}
    for stage, r in files.items():
        check_shape(model, "SubmitJob", r, f"submit-{stage}.json")
    check_run(files, definition, refs, "submit-*.json")

    for shards, tasks in ((8, 4), (1, 1), (64, 1), (1, 3), (10000, 10000)):
        out = subprocess.run(
            ["bash", os.path.join(HERE, "submit.sh"), "/mnt/winback/pipeline.yaml", "--shards", str(shards),
             "--tasks", str(tasks), "--run-id", "check", "--dry-run"],
            capture_output=True, text=True)
        where = f"submit.sh --shards {shards} --tasks {tasks}"
        if out.returncode != 0:
            problem(where, f"--dry-run failed: {out.stderr.strip()}")
            continue
        made = dict(zip(("partition", "shard", "merge"), (json.loads(l) for l in out.stdout.splitlines())))
        for stage, r in made.items():
            check_shape(model, "SubmitJob", r, f"{where} {stage}")
        check_run(made, definition, refs, where)

    for p in problems:
        print(f"FAILED {p}")
    print(f"aws-batch: {'ok' if not problems else f'{len(problems)} problems'} "
          f"(botocore {__import__('botocore').__version__}, batch API {model.api_version})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
