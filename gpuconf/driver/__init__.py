"""The NVIDIA driver stack's data: the branch catalog (`branches.yml`: each branch's versions,
flavours and the CUDA it carries), NVIDIA's redistributable release manifests, and the package
names of each OS family. Pure data and lookups, no I/O."""
