"""Marker `vllm_ci`: the CI subset of the vLLM tests (`.ci/vllm_cpu.sh --subset`). It covers weight sync and
log-prob agreement in-process (the LoRA scenario: its merged weights go through the same reload as full
fine-tuning's) and through vLLM's server, in the least engine starts: one in-process sync, one resume, one
server. Full fine-tuning in-process and the loop tests run in the full set (`.ci/vllm_cpu.sh`)."""


def pytest_configure(config):
    config.addinivalue_line("markers", "vllm_ci: the vLLM tests in the CI subset (.ci/vllm_cpu.sh --subset)")
