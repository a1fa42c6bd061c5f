/* not_classification.c — tf_cnn_benchmarks' models of other tasks than image
 * classification (not_classification.h), read off its model_config.py: the object
 * detector registered for COCO, the speech model for LibriSpeech, and NCF. */
#include "loader/not_classification.h"

#include <stddef.h>
#include <string.h>

static const struct {
  const char *name, *what;
} models[] = {
    {"ssd300", "tf_cnn_benchmarks' SSD300 object detector (COCO)"},
    {"deepspeech2", "tf_cnn_benchmarks' DeepSpeech2 speech recognizer (LibriSpeech)"},
    {"ncf", "tf_cnn_benchmarks' NCF recommender (neural collaborative filtering)"},
};

const char *cnnb_not_classification_model(const char *name) {
  if (!name) return NULL;
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
    if (strcmp(models[i].name, name) == 0) return models[i].what;
  return NULL;
}
