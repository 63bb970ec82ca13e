# placeholder replaced by the kernels work
