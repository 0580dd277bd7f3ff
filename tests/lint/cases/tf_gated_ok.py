# ruff: noqa
import tensorflow as tf
from packaging import version

if version.parse(tf.__version__) >= version.parse("2.4"):
    tf.keras.mixed_precision.set_global_policy("mixed_float16")
else:
    tf.keras.mixed_precision.experimental.set_policy("mixed_float16")
