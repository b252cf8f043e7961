"""gdn-ucache kernels: float64 ReplaySSM oracle and the CuTe-DSL verify+flush kernel."""
