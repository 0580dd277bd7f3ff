# ruff: noqa
import tensorflow.compat.v2 as tf2

policy = tf2.keras.mixed_precision.experimental.Policy("mixed_float16")  # expect: CDL002
policy = tf2.keras.mixed_precision.experimental.Policy("mixed_float16", loss_scale="dynamic")  # expect: CDL002
tf2.keras.mixed_precision.experimental.set_policy(policy)  # expect: CDL002
opt = tf2.keras.mixed_precision.experimental.LossScaleOptimizer(opt, "dynamic")  # expect: CDL002
