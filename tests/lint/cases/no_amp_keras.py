# ruff: noqa
import tensorflow as tf

if __name__ == "__main__":
    print(tf.config.list_physical_devices("GPU"))
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    model.fit(x=[[1.0]], y=[[2.0]], epochs=3)  # expect: CDL003
