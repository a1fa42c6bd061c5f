"""tensorboard_check.py — a run's TensorBoard events, read by TensorBoard's own reader
(EventAccumulator), and tf_cnn_benchmarks' benchmark_run.log / metric.log, read with
Python's json, compared with the run's JSON-lines log (benchmark_run.rank0.jsonl), the
record of what the run measured (tests/cli/tensorboard.sh runs it).

  tensorboard_check.py --jsonl FILE [--train DIR --train_steps S,S,..]
                       [--eval DIR --eval_steps S,S,..] [--tf_dir DIR] [--accuracy]

--train DIR: the training events of DIR hold exactly the tags tf_cnn_benchmarks writes
  (total_loss, learning_rate, images/sec, global_step/sec, with --accuracy top_1_accuracy
  and top_5_accuracy) at exactly the global steps S, each value the JSON log's step record
  of that global step rounded to float (the events' simple_value is a float);
--eval DIR: eval/Accuracy@1 and @5 at the global steps S, as the JSON log's eval records;
--tf_dir DIR: metric.log's lines have the logger's six keys and its timestamp format,
  current_examples_per_sec (and the accuracies) at each step record's 1-based step with
  its images/sec, average_examples_per_sec (eval_average_... for --eval) the summary's,
  eval_top_1/5_accuracy the eval records'; benchmark_run.log is one JSON object with the
  logger's keys, run_parameters sorted by name and the run's model, batch and batches.
Every file's first event is file_version "brain.Event:2". Exit 1 naming each mismatch."""
import argparse
import datetime
import json
import os
import struct
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

problems = []


def problem(text):
    problems.append(text)
    print("FAIL: " + text)


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def steps_arg(text):
    return [int(s) for s in text.split(",") if s]


def load_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def events(directory):
    files = [n for n in os.listdir(directory) if "tfevents" in n]
    if len(files) != 1:
        problem("%s: want one events file, found %s" % (directory, files))
    acc = EventAccumulator(directory)
    acc.Reload()
    if acc.file_version != 2.0:
        problem("%s: file_version %r, want brain.Event:2" % (directory, acc.file_version))
    return acc


def scalars(acc, tag):
    return {e.step: e for e in acc.Scalars(tag)}


def same(what, got, want):
    if got != want:
        problem("%s: %r, want %r" % (what, got, want))


def ok(before, text):
    if len(problems) == before:
        print("ok: " + text)


def check_train(directory, want_steps, records, accuracy):
    before = len(problems)
    acc = events(directory)
    run = next(r for r in records if r["record"] == "run")
    batch = run["resolved"]["global_batch_size"]
    by_global = {r["global_step"]: r for r in records if r["record"] == "step"}
    tags = {"total_loss", "learning_rate", "images/sec", "global_step/sec"}
    if accuracy:
        tags |= {"top_1_accuracy", "top_5_accuracy"}
    same(directory + ": scalar tags", sorted(acc.Tags()["scalars"]), sorted(tags))
    start, end = run["time"] - 5, records[-1]["time"] + 5
    for tag in sorted(tags):
        got = scalars(acc, tag)
        same("%s: %s's steps" % (directory, tag), sorted(got), want_steps)
        for step, e in sorted(got.items()):
            r = by_global.get(step)
            if r is None:
                problem("%s: %s at global step %d: no step record of it" % (directory, tag, step))
                continue
            want = {"total_loss": r["loss"], "learning_rate": r["learning_rate"],
                    "images/sec": r["images_per_sec"],
                    "global_step/sec": r["images_per_sec"] / batch,
                    "top_1_accuracy": r["top1"], "top_5_accuracy": r["top5"]}[tag]
            same("%s: %s at global step %d" % (directory, tag, step), e.value, f32(want))
            if not start <= e.wall_time <= end:
                problem("%s: %s's wall time %f outside the run (%f..%f)"
                        % (directory, tag, e.wall_time, start, end))
    ok(before, "%s: %d training events read by EventAccumulator match the JSON log"
       % (directory, len(want_steps)))


def check_eval(directory, want_steps, records):
    before = len(problems)
    acc = events(directory)
    by_global = {r["global_step"]: r for r in records if r["record"] == "eval"}
    same(directory + ": scalar tags", sorted(acc.Tags()["scalars"]),
         ["eval/Accuracy@1", "eval/Accuracy@5"])
    for tag, key in (("eval/Accuracy@1", "top1"), ("eval/Accuracy@5", "top5")):
        got = scalars(acc, tag)
        same("%s: %s's steps" % (directory, tag), sorted(got), want_steps)
        for step, e in got.items():
            if step in by_global:
                same("%s: %s at %d" % (directory, tag, step), e.value, f32(by_global[step][key]))
            else:
                problem("%s: %s at global step %d: no eval record of it" % (directory, tag, step))
    ok(before, "%s: evaluation events at %s match the JSON log" % (directory, want_steps))


def close(a, b):
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-30)


def check_tf_files(directory, records):
    before = len(problems)
    run = next(r for r in records if r["record"] == "run")
    summary = records[-1]
    fmt = "%Y-%m-%dT%H:%M:%S.%fZ"
    metrics = []
    with open(os.path.join(directory, "metric.log")) as f:
        for n, line in enumerate(f, 1):
            m = json.loads(line)
            same("metric.log line %d: keys" % n, list(m),
                 ["name", "value", "unit", "global_step", "timestamp", "extras"])
            datetime.datetime.strptime(m["timestamp"], fmt)
            same("metric.log line %d: extras" % n, m["extras"], [])
            metrics.append(m)
    want = []
    for r in records:
        if r["record"] == "step":
            want.append(("current_examples_per_sec", r["images_per_sec"], r["step"]))
            for name, key in (("top_1_accuracy", "top1"), ("top_5_accuracy", "top5")):
                if r[key] is not None:
                    want.append((name, r[key], r["step"]))
        elif r["record"] == "eval":
            want.append(("eval_top_1_accuracy", r["top1"], r["global_step"]))
            want.append(("eval_top_5_accuracy", r["top5"], r["global_step"]))
    if run["resolved"]["mode"] == "evaluation":
        want.append(("eval_average_examples_per_sec", summary["images_per_sec"],
                     next(r for r in records if r["record"] == "eval")["global_step"]))
    else:
        want.append(("average_examples_per_sec", summary["images_per_sec"], summary["steps"]))
    got = [(m["name"], m["value"], m["global_step"]) for m in metrics]
    if len(got) != len(want) or not all(
            g[0] == w[0] and g[2] == w[2] and close(g[1], w[1]) for g, w in zip(got, want)):
        problem("metric.log: %s, want %s" % (got, want))
    with open(os.path.join(directory, "benchmark_run.log")) as f:
        text = f.read()
    same("benchmark_run.log: lines", text.count("\n"), 1)
    info = json.loads(text)
    for key in ("model_name", "dataset", "machine_config", "test_id", "run_date",
                "tensorflow_version", "tensorflow_environment_variables", "run_parameters"):
        if key not in info:
            problem("benchmark_run.log: no %s" % key)
    datetime.datetime.strptime(info["run_date"], fmt)
    same("benchmark_run.log: model_name", info["model_name"], run["resolved"]["model"])
    same("benchmark_run.log: dataset", info["dataset"], {"name": run["resolved"]["dataset"]})
    params = info["run_parameters"]
    same("run_parameters: sorted by name", [p["name"] for p in params],
         sorted(p["name"] for p in params))
    values = {p["name"]: p for p in params}
    same("run_parameters: batch_size_per_device", values["batch_size_per_device"],
         {"name": "batch_size_per_device",
          "long_value": run["resolved"]["batch_size_per_replica"]})
    same("run_parameters: num_batches", values["num_batches"]["long_value"],
         run["resolved"]["num_batches"])
    same("run_parameters: model", values["model"]["string_value"], run["resolved"]["model"])
    cores = info["machine_config"]["cpu_info"]["num_cores"]
    same("machine_config: num_cores", cores, run["machine"]["logical_cores"])
    ok(before, "%s: metric.log (%d metrics) and benchmark_run.log match the JSON log"
       % (directory, len(metrics)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--jsonl", required=True)
    p.add_argument("--train")
    p.add_argument("--train_steps", type=steps_arg, default=[])
    p.add_argument("--eval")
    p.add_argument("--eval_steps", type=steps_arg, default=[])
    p.add_argument("--tf_dir")
    p.add_argument("--accuracy", action="store_true")
    a = p.parse_args()
    records = load_jsonl(a.jsonl)
    if a.train:
        check_train(a.train, a.train_steps, records, a.accuracy)
    if a.eval:
        check_eval(a.eval, a.eval_steps, records)
    if a.tf_dir:
        check_tf_files(a.tf_dir, records)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
