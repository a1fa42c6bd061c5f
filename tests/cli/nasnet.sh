#!/usr/bin/env bash
# NASNet-A (plugins/models/nasnet): --model_info's trainable parameters against counts
# obtained outside cnnbench, and a few training steps of each model on the cpu device.
#
# Where the numbers come from (TensorFlow 2.21, tf_slim 1.1, tf_keras 2.21, CPU):
#  - tf_cnn_benchmarks' own code: models/tf1_only/nasnet_model.py and nasnet_utils.py
#    from github.com/tensorflow/benchmarks (commit 8fb7907), unchanged, run in graph mode
#    (tf.compat.v1) with tf_slim standing in for tensorflow.contrib (slim, arg_scope, the
#    initializers; HParams as a plain object), called as NasnetModel.add_inference calls
#    it: build_nasnet_mobile / build_nasnet_large / build_nasnet_cifar(images,
#    is_training=True, data_format='NHWC') with num_classes=None and no arg scope, then
#    tf_cnn_benchmarks' affine (features x classes + classes). The sum of
#    tf.trainable_variables() plus that affine: nasnet 5,291,035 (1001 classes), nasnet on
#    CIFAR-10 3,346,538 (10), nasnetlarge 88,757,183 (1001).
#  - Keras, independently: tf.keras.applications.NASNetMobile(weights=None) has
#    count_params() 5,326,716, of which 5,289,978 trainable (36,738 are batch norm's
#    moving statistics); NASNetLarge(weights=None) 88,949,818, of which 88,753,150
#    trainable. Keras' top is one dense layer to 1000 classes on the same features, so
#    --num_classes=1000 must give its trainable counts exactly.
# The structures differ in one way the counts do not show: tf_cnn_benchmarks builds the
# network without nasnet_*_arg_scope, so every conv has a bias and no batch norm a scale
# (Keras: the reverse); each conv feeds one batch norm of its width, so the counts agree.
# Neither counts the auxiliary head: Keras builds none, and tf_cnn_benchmarks passes
# num_classes=None, which skips it (plugins/models/nasnet/README.md).
set -euo pipefail
: "${CNNBENCH:?}"
params() { # params <args...>: the trainable parameters --model_info reports
  "$CNNBENCH" "$@" --model_info --device=none_needed | sed -n 's/^Trainable parameters: //p'
}
expect() { # expect <want> <args...>
  local want=$1; shift
  local got; got=$(params "$@")
  [ "$got" = "$want" ] || { echo "FAIL: $*: $got trainable parameters, want $want"; exit 1; }
  echo "ok   $*: $got"
}
expect 5291035 --model=nasnet
expect 5289978 --model=nasnet --num_classes=1000 # Keras NASNetMobile's trainable
expect 3346538 --model=nasnet --data_name=cifar10
expect 88757183 --model=nasnetlarge
expect 88753150 --model=nasnetlarge --num_classes=1000 # Keras NASNetLarge's trainable

# Training on the cpu device, at image sizes that keep CI short (the cells work at any
# size: the features end in a spatial mean). The loss must fall over the steps where
# there are several; nasnetlarge takes two steps of one image.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
train() { # train <steps> <args...>: prints "<first loss> <last loss>"
  local steps=$1; shift
  "$CNNBENCH" "$@" --num_batches="$steps" --num_warmup_batches=0 --display_every=1 \
    --optimizer=momentum --init_learning_rate=0.001 --num_intra_threads=1 >"$tmp/log" 2>&1 ||
    { echo "FAIL: $* did not train:"; tail -5 "$tmp/log"; exit 1; }
  awk -F'\t' -v n="$steps" '$1 == 1 {f = $3} $1 == n {l = $3} END {print f, l}' "$tmp/log"
}
falls() { # falls <steps> <args...>
  local first last; read -r first last < <(train "$@")
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' ||
    { echo "FAIL: ${*:2}: loss did not fall: $first -> $last"; exit 1; }
  echo "ok   ${*:2}: loss $first -> $last"
}
falls 6 --model=nasnet --image_size=64 --batch_size=2
falls 4 --model=nasnet --data_name=cifar10 --image_size=16 --batch_size=2
read -r first last < <(train 2 --model=nasnetlarge --image_size=48 --batch_size=1)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 0 && b > 0 && a < 100 && b < 100) }' ||
  { echo "FAIL: nasnetlarge: losses $first, $last"; exit 1; }
echo "ok   nasnetlarge --image_size=48: loss $first -> $last"
echo PASS
