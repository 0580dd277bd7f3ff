# ruff: noqa
import tensorflow as tf
from tensorflow.keras.mixed_precision import experimental as mixed_precision

policy = mixed_precision.Policy("mixed_float16")  # expect: CDL002
mixed_precision.set_policy(policy)  # expect: CDL002
tf.keras.mixed_precision.experimental.set_policy("mixed_float16")  # expect: CDL002
tf.keras.mixed_precision.set_global_policy("mixed_float16")
