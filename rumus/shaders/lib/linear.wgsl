// Shared by the 1-D kernels of 256 invocations per workgroup over a 2-D dispatch (x up to the
// adapter's limit, then rows of y): the index of this invocation.

fn linear(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * 256u + lid;
}
