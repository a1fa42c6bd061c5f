#!/usr/bin/env python3
"""tf_test_util.py — tf_cnn_benchmarks' own log parsers and train_and_eval checks, run on
cnnbench's console output (tests/cli/tf_parsers.sh).

    tf_test_util.py CNNBENCH WORKDIR

The functions below re-implement, from their documented behaviour, the ones of
tf_cnn_benchmarks' test_util.py that its tests read a run's stdout with (its source is not
copied into this project): get_training_outputs_from_logs,
get_evaluation_outputs_from_logs, check_training_outputs_are_reasonable, train_and_eval,
and the parameters of get_params. Their names, arguments and assertions are tf's, so a
line tf's parsers would reject fails here too:

- a training step line is one containing 'images/sec' and '+/-'; split on whitespace it
  has 9 fields ("10 images/sec: 0.2 +/- 0.0 (jitter = 0.0) 6.908"), or 11 with the two
  accuracies when --print_training_accuracy or --forward_only; field 8 is the loss,
  9 and 10 the top-1 and top-5 accuracies; at least one such line;
- an evaluation line is one containing 'Accuracy @ '; it has exactly 12 fields
  ("Accuracy @ 1 = 0.5000 Accuracy @ 5 = 1.0000 [80 examples]"), field 4 the top-1,
  field 9 the top-5; at least one;
- train_and_eval trains from scratch (num_batches step lines), trains again from the
  checkpoint with num_batches doubled (num_batches - num_warmup_batches step lines: the
  count is a total, and the first run's warm-up steps were global steps too; a new
  checkpoint file appears), then evaluates it with --eval (exactly one evaluation line).

Python 3's standard library only, so it runs wherever the tests do. Exit 0 when every
check passed; 1 (an AssertionError's traceback) when one failed.
"""
import collections
import os
import subprocess
import sys

TrainingOutput = collections.namedtuple('TrainingOutput',
                                        ['loss', 'top_1_accuracy', 'top_5_accuracy'])
EvalOutput = collections.namedtuple('EvalOutput', ['top_1_accuracy', 'top_5_accuracy'])


def get_training_outputs_from_logs(logs, print_training_accuracy):
    """tf's: one TrainingOutput per step line of `logs` (accuracies -1 without them)."""
    outputs = []
    for log in logs:
        if 'images/sec' in log and '+/-' in log:
            parts = log.split()
            if print_training_accuracy:
                assert len(parts) == 11, 'step line with accuracy: %d fields: %r' % (
                    len(parts), log)
                top_1, top_5 = float(parts[9]), float(parts[10])
            else:
                assert len(parts) == 9, 'step line: %d fields: %r' % (len(parts), log)
                top_1 = top_5 = -1
            outputs.append(TrainingOutput(float(parts[8]), top_1, top_5))
    assert len(outputs) >= 1, 'no step line'
    return outputs


def get_evaluation_outputs_from_logs(logs):
    """tf's: one EvalOutput per 'Accuracy @ ' line of `logs`."""
    outputs = []
    for log in logs:
        if 'Accuracy @ ' in log:
            parts = log.split()
            assert len(parts) == 12, 'evaluation line: %d fields: %r' % (len(parts), log)
            outputs.append(EvalOutput(float(parts[4]), float(parts[9])))
    assert outputs, 'no evaluation line'
    return outputs


def check_training_outputs_are_reasonable(training_outputs, print_training_accuracy,
                                          max_final_loss=10., previous_final_loss=None):
    """tf's: losses at most 100, the last at most max_final_loss, a resumed run's first
    loss not above the previous run's last (1% slack), accuracies 1 at the end."""
    if previous_final_loss is not None:
        assert training_outputs[0].loss <= previous_final_loss * 1.01, (
            'resumed at loss %g after %g' % (training_outputs[0].loss, previous_final_loss))
    for output in training_outputs:
        assert output.loss <= 100., 'loss %g' % output.loss
    last = training_outputs[-1]
    if print_training_accuracy:
        assert last.top_1_accuracy == 1.0 and last.top_5_accuracy == 1.0, last
    if max_final_loss is not None:
        assert last.loss <= max_final_loss, 'final loss %g' % last.loss


def train_and_eval(run_fn, params, check_output_values, max_final_loss=10., skip=None):
    """tf's train_and_eval: run_fn(run_type, params) returns one list of stdout lines per
    worker; params is a dict of tf_cnn_benchmarks' parameter names."""
    assert not skip or skip in {'eval', 'eval_and_train_from_checkpoint'}
    print_training_accuracy = params['print_training_accuracy'] or params['forward_only']
    # Part 1: train from scratch.
    initial_logs = run_fn('InitialTraining', params)
    assert len(initial_logs) >= 1
    for lines in initial_logs:
        initial_outputs = get_training_outputs_from_logs(lines, print_training_accuracy)
        if params['cross_replica_sync'] and params['batch_group_size'] == 1:
            assert len(initial_outputs) == params['num_batches'], (
                'InitialTraining: %d step lines, want num_batches = %d' %
                (len(initial_outputs), params['num_batches']))
        if check_output_values:
            check_training_outputs_are_reasonable(initial_outputs, print_training_accuracy,
                                                  max_final_loss=max_final_loss)
    entries = set(os.listdir(params['train_dir'])) if params['train_dir'] else None
    if entries is not None:
        assert len(entries) > 0, 'InitialTraining wrote nothing in the train_dir'
    if skip == 'eval_and_train_from_checkpoint':
        return
    # Part 2: train from the checkpoint, num_batches doubled: as many timed steps as before,
    # less the first run's warm-up (they were global steps too).
    assert entries is not None
    params = dict(params, num_batches=params['num_batches'] * 2)
    resumed_logs = run_fn('TrainingFromCheckpoint', params)
    assert len(resumed_logs) >= 1
    for lines in resumed_logs:
        resumed_outputs = get_training_outputs_from_logs(lines, print_training_accuracy)
        if params['cross_replica_sync'] and params['batch_group_size'] == 1:
            want = params['num_batches'] // 2 - params['num_warmup_batches']
            assert len(resumed_outputs) == want, (
                'TrainingFromCheckpoint: %d step lines, want num_batches // 2 - '
                'num_warmup_batches = %d' % (len(resumed_outputs), want))
        if check_output_values:
            check_training_outputs_are_reasonable(
                resumed_outputs, print_training_accuracy, max_final_loss=max_final_loss,
                previous_final_loss=initial_outputs[-1].loss)
    assert entries != set(os.listdir(params['train_dir'])), 'no new checkpoint after resuming'
    if skip == 'eval':
        return
    # Part 3: evaluate the checkpoint.
    params = dict(params, num_batches=params['num_batches'] // 2, eval=True)
    eval_logs = run_fn('Evaluation', params)
    assert len(eval_logs) >= 1
    for lines in eval_logs:
        eval_outputs = get_evaluation_outputs_from_logs(lines)
        assert len(eval_outputs) == 1, 'Evaluation: %d evaluation lines' % len(eval_outputs)
        if check_output_values:
            assert eval_outputs[0] == (1.0, 1.0), eval_outputs[0]


def get_params(train_dir):
    """tf's get_params (those of its parameters cnnbench needs told; the others are
    tf's defaults, which cnnbench's match or which mean nothing here)."""
    return {
        'batch_size': 2, 'display_every': 1, 'init_learning_rate': 0.005, 'model': 'trivial',
        'num_batches': 20, 'num_gpus': 2, 'num_warmup_batches': 5, 'optimizer': 'sgd',
        'print_training_accuracy': True, 'train_dir': train_dir,
        'variable_update': 'parameter_server', 'weight_decay': 0, 'distortions': True,
        # tf's defaults that train_and_eval reads.
        'forward_only': False, 'eval': False, 'cross_replica_sync': True,
        'batch_group_size': 1,
    }


# Parameters train_and_eval reads that are not flags to pass (tf's defaults, unchanged here).
NOT_FLAGS = {'cross_replica_sync', 'batch_group_size'}


class Cnnbench:
    """run_fn for train_and_eval: one cnnbench process, its stdout's lines (one worker)."""

    def __init__(self, binary, workdir):
        self.binary, self.workdir, self.runs = binary, workdir, 0
        self.stdout = {}  # run type: the lines of its last run

    def command(self, params):
        argv = [self.binary, '--num_intra_threads=1']
        for name, value in sorted(params.items()):
            if name in NOT_FLAGS or value is None:
                continue
            if isinstance(value, bool):
                value = 'true' if value else 'false'
            argv.append('--%s=%s' % (name, value))
        return argv

    def __call__(self, run_type, params):
        self.runs += 1
        argv = self.command(params)
        err = os.path.join(self.workdir, 'run%d-%s.err' % (self.runs, run_type))
        with open(err, 'w') as err_file:
            done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=err_file,
                                  universal_newlines=True, timeout=600)
        with open(os.path.join(self.workdir, 'run%d-%s.out' % (self.runs, run_type)), 'w') as f:
            f.write(done.stdout)
        assert done.returncode == 0, '%s: exit %d: %s (stderr in %s)' % (
            run_type, done.returncode, ' '.join(argv), err)
        print('%s: %s' % (run_type, ' '.join(argv[1:])))
        self.stdout[run_type] = done.stdout.splitlines()
        return [self.stdout[run_type]]

    def expect_lines(self, run_type, *wanted):
        """The header and progress lines tf's print_info and its loop print, as they print
        them (tf's constants.BenchmarkMode strings)."""
        for line in wanted:
            assert line in self.stdout[run_type], '%s: no line %r' % (run_type, line)


def parsers_reject_foreign_lines():
    """The parsers can fail: lines in formats tf's parsers refuse are refused here too."""
    for lines, parse in (
            # An evaluation line with a step before it (14 fields).
            (['Step 3: Accuracy @ 1 = 0.5000 Accuracy @ 5 = 1.0000 [8 examples]'],
             get_evaluation_outputs_from_logs),
            # A step line without the accuracies the run said it prints.
            (['1\timages/sec: 5.0 +/- 0.0 (jitter = 0.0)\t7.050'],
             lambda l: get_training_outputs_from_logs(l, True)),
            # No step line at all (an --eval run's examples/sec lines are none).
            (['1\t17.9 examples/sec'], lambda l: get_training_outputs_from_logs(l, False))):
        try:
            parse(lines)
        except AssertionError:
            continue
        raise AssertionError('a parser accepted %r' % lines)
    print('ok: the parsers refuse lines tf_cnn_benchmarks\' parsers refuse')


def main():
    if len(sys.argv) != 3:
        sys.stderr.write('usage: tf_test_util.py CNNBENCH WORKDIR\n')
        return 2
    binary, workdir = sys.argv[1], sys.argv[2]
    parsers_reject_foreign_lines()
    run_fn = Cnnbench(binary, workdir)

    def train_dir(name):
        path = os.path.join(workdir, name)
        os.mkdir(path)
        return path

    # tf's testNoPrintAccuracy and the default (with accuracy): train, resume, evaluate.
    # check_output_values=False as tf's own _train_and_eval_local (its values depend on
    # tf's data); the line counts and formats are checked either way.
    for accuracy in (True, False):
        params = dict(get_params(train_dir('accuracy' if accuracy else 'plain')),
                      print_training_accuracy=accuracy)
        train_and_eval(run_fn, params, check_output_values=False)
        run_fn.expect_lines('InitialTraining', 'Mode:        training',
                            'Generating training model', 'Running warm up', 'Done warm up')
        run_fn.expect_lines('Evaluation', 'Mode:        evaluation', 'Generating evaluation model')
        assert not any(l.startswith('AllReduce:') for l in run_fn.stdout['InitialTraining'])
        print('ok: train_and_eval, print_training_accuracy=%s: 20, then 15 resumed step '
              'lines, one evaluation' % accuracy)

    # tf's testForwardOnlyAndFreeze: forward only prints the accuracies; no train_dir
    # (cnnbench refuses checkpoints with --forward_only, so training from one is skipped).
    params = dict(get_params(None), forward_only=True, print_training_accuracy=False)
    train_and_eval(run_fn, params, check_output_values=False,
                   skip='eval_and_train_from_checkpoint')
    run_fn.expect_lines('InitialTraining', 'Mode:        forward only')
    print('ok: forward only: 20 step lines with accuracies')

    # tf's testEvalDuringTraining: 7 steps, an evaluation every 2 and a final one:
    # num_batches // 2 + 1 evaluation lines, and the step lines parse as training's.
    params = dict(get_params(None), print_training_accuracy=False, num_warmup_batches=0,
                  num_batches=7, num_eval_batches=2, init_learning_rate=0,
                  eval_during_training_every_n_steps=2)
    lines = run_fn('EvalDuringTraining', params)[0]
    assert len(get_training_outputs_from_logs(lines, False)) == 7
    evaluations = get_evaluation_outputs_from_logs(lines)
    assert len(evaluations) == 7 // 2 + 1, '%d evaluations, want 4' % len(evaluations)
    run_fn.expect_lines('EvalDuringTraining', 'Mode:        training + evaluation',
                        'Running evaluation at global_step 2', 'Resuming training',
                        'Running final evaluation at global_step 7')
    print('ok: eval during training: 7 step lines, 4 evaluation lines')

    # print_info's AllReduce line for replicated: None without --all_reduce_spec.
    params = dict(get_params(None), variable_update='replicated', num_batches=1,
                  num_warmup_batches=0)
    assert len(get_training_outputs_from_logs(run_fn('Replicated', params)[0], True)) == 1
    run_fn.expect_lines('Replicated', 'Variables:   replicated', 'AllReduce:   None')
    print('ok: replicated prints tf\'s AllReduce line')
    return 0


if __name__ == '__main__':
    sys.exit(main())
