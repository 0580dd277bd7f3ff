# ruff: noqa
import tensorflow as tf

tf.keras.mixed_precision.experimental.set_policy("mixed_float16")  # expect: CDL002
