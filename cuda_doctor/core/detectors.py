"""The lint detectors, by the name a rule file's ``detector`` field gives, with the rule id each
one's hits carry.  Checked when rules load: a rule naming a detector not listed here (or one
that reports another id) is a rule file error, and a detector whose rule is missing is an
internal error, so that no finding is ever dropped for want of its rule."""

from __future__ import annotations

DETECTORS: dict[str, str] = {
    "unreadable": "CDL000",  # the engine: a file that cannot be read or parsed
    "torch_cuda_amp": "CDL001",  # CDL001-CDL010: python_ast (also notebooks' code cells)
    "tf_mixed_precision_experimental": "CDL002",
    "no_mixed_precision": "CDL003",
    "fp16_without_grad_scaler": "CDL004",
    "grad_scaler_with_bf16": "CDL005",
    "distributed_launch": "CDL006",  # also dockerfile and shell
    "local_rank_argument": "CDL007",
    "dataloader_num_workers": "CDL008",
    "dataloader_pin_memory": "CDL009",
    "cudnn_benchmark": "CDL010",
    "visible_devices_after_cuda_init": "CDL011",
    "jax_removed_api": "CDL012",
    "cuda_tag_format": "CDL101",  # CDL101-CDL105: dockerfile
    "cuda_tag_deleted": "CDL102",
    "cuda_tag_unsupported": "CDL103",
    "untagged_image": "CDL104",
    "image_torch_cuda_mismatch": "CDL105",
    "compile_without_c_compiler": "CDL106",  # python_ast, against the image of the project's Dockerfile
    "torch_variant": "CDL201",  # requirements (requirements files, pyproject.toml, pip install lines)
}
