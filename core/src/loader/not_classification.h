/* not_classification.h — the models tf_cnn_benchmarks has that are not image
 * classifiers (ssd300, deepspeech2, ncf). A tf_cnn_benchmarks command line may name one
 * in --model; cnnbench trains and benchmarks image classifiers only, so the loader
 * refuses such a name saying what the model is, rather than as a name nothing offers
 * (with a "did you mean" pointing at some classifier). */
#ifndef CNNB_LOADER_NOT_CLASSIFICATION_H
#define CNNB_LOADER_NOT_CLASSIFICATION_H

/* What `name` is in tf_cnn_benchmarks ("tf_cnn_benchmarks' SSD300 object detector (COCO)")
 * when it is one of its models of another task; NULL otherwise (NULL name included). */
const char *cnnb_not_classification_model(const char *name);

#endif
