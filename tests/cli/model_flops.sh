#!/usr/bin/env bash
# Forward FLOPs per image (a multiply-add counts 2; conv2d + dense, as published figures
# count) against published figures, within the spread of the figures themselves:
#  - resnet50:   3.8e9 multiply-adds (He et al. 2015, "Deep Residual Learning", Table 1);
#                4.1e9 with the stride-2 1x1 counted at full size as frameworks do -> 7.6-8.2
#  - vgg16:      15.3e9 multiply-adds (He et al. 2015, section 3.3) to 15.5e9 (Canziani et
#                al. 2016, "An Analysis of Deep Neural Network Models") -> 30.6-31.0
#  - inception3: 5.7e9 multiply-adds at 299x299 (Szegedy et al. 2016, "Rethinking the
#                Inception Architecture", and ptflops' torchvision count 5.71e9) -> 11.3-11.5
#  - alexnet:    tf_cnn_benchmarks' layout (Krizhevsky 2014, "One weird trick": 64/192/384/
#                384/256, no groups) at 227x227: 0.839e9 multiply-adds by hand (conv 70.3M +
#                223.9M + 112.1M + 224.2M + 149.5M, dense 37.7M + 16.8M + 4.1M) -> 1.66-1.70
set -euo pipefail
: "${CNNBENCH:?}"
check() { # check <model> <low> <high>
  local g; g=$("$CNNBENCH" --model="$1" --model_info | sed -n 's/^Forward GFLOPs per image: //p')
  awk -v g="$g" -v lo="$2" -v hi="$3" 'BEGIN { exit !(g >= lo && g <= hi) }' \
    || { echo "FAIL: $1: $g GFLOPs, published $2-$3"; exit 1; }
  echo "ok $1: $g GFLOPs (published $2-$3)"
}
check resnet50 7.6 8.2
check vgg16 30.6 31.0
check inception3 11.3 11.5
check alexnet 1.66 1.70
