"""Checks the Winograd F(2x2, 3x3) transforms of rumus/shaders/winograd.wgsl against a direct
convolution in float64: the forward (Y = A^T [(G g G^T) * (B^T d B)] A summed over channels),
the input gradient as the forward of the output gradient with the filters rotated 180 degrees
and transposed at padding 2 - pad, and the weight gradient (dW = G^T [sum_p (A dY A^T) * V] G),
over paddings 0-2, odd and even outputs (partial tiles, zeros beyond the output) and 1x1 images.

    python3 tools/gen/winograd_transforms.py     (needs numpy; prints the largest errors)
"""
import numpy as np

rng=np.random.default_rng(0)
BT=np.array([[1,0,-1,0],[0,1,1,0],[0,-1,1,0],[0,1,0,-1]],float)
G=np.array([[1,0,0],[.5,.5,.5],[.5,-.5,.5],[0,0,1]],float)
AT=np.array([[1,1,1,0],[0,1,-1,-1]],float)
def conv(x,w,pad):
    n,c,h,ww=x.shape; o=w.shape[0]
    xp=np.pad(x,((0,0),(0,0),(pad,pad),(pad,pad)))
    oh,ow=h+2*pad-2,ww+2*pad-2
    y=np.zeros((n,o,oh,ow))
    for i in range(3):
        for j in range(3):
            y+=np.einsum('nchw,oc->nohw',xp[:,:,i:i+oh,j:j+ow],w[:,:,i,j])
    return y
def tiles(x,pad,oh,ow):
    n,c,h,w=x.shape; th,tw=-(-oh//2),-(-ow//2)
    V=np.zeros((16,c,n*th*tw))
    for b in range(n):
      for ty in range(th):
        for tx in range(tw):
          d=np.zeros((c,4,4))
          for i in range(4):
            for j in range(4):
              r,q=2*ty-pad+i,2*tx-pad+j
              if 0<=r<h and 0<=q<w: d[:,i,j]=x[b,:,r,q]
          v=np.einsum('ai,cij,bj->cab',BT,d,BT)
          V[:,:,(b*th+ty)*tw+tx]=v.reshape(c,16).T
    return V,th,tw
def wino_fwd(x,w,pad,flip=False):
    if flip: w=w[:,:,::-1,::-1].transpose(1,0,2,3)
    n,c,h,ww=x.shape; o=w.shape[0]; oh,ow=h+2*pad-2,ww+2*pad-2
    U=np.einsum('ai,ocij,bj->abo c'.replace(' ',''),G,w,G).reshape(16,o,c)
    V,th,tw=tiles(x,pad,oh,ow)
    M=np.einsum('xoc,xcp->xop',U,V)
    y=np.zeros((n,o,oh,ow))
    for b in range(n):
      for ty in range(th):
        for tx in range(tw):
          m=M[:,:,(b*th+ty)*tw+tx].T.reshape(o,4,4)
          t=np.einsum('ai,oij,bj->oab',AT,m,AT)
          for i in range(2):
            for j in range(2):
              if 2*ty+i<oh and 2*tx+j<ow: y[b,:,2*ty+i,2*tx+j]=t[:,i,j]
    return y
def wino_wgrad(x,dy,pad):
    n,c,h,w=x.shape; o=dy.shape[1]; oh,ow=dy.shape[2:]
    V,th,tw=tiles(x,pad,oh,ow)
    Z=np.zeros((16,o,V.shape[2]))
    for b in range(n):
      for ty in range(th):
        for tx in range(tw):
          g=np.zeros((o,2,2))
          for i in range(2):
            for j in range(2):
              if 2*ty+i<oh and 2*tx+j<ow: g[:,i,j]=dy[b,:,2*ty+i,2*tx+j]
          z=np.einsum('ia,oij,jb->oab',AT,g,AT)  # A g A^T
          Z[:,:,(b*th+ty)*tw+tx]=z.reshape(o,16).T
    dU=np.einsum('xop,xcp->xoc',Z,V).reshape(4,4,o,c)
    return np.einsum('ai,aboc,bj->ocij',G,dU,G)  # G^T dU G
for (n,c,o,h,w,pad) in [(2,3,5,7,6,1),(1,2,3,5,5,0),(3,4,2,1,1,2),(1,3,3,5,8,2),(2,2,2,4,3,1)]:
    x=rng.standard_normal((n,c,h,w)); wt=rng.standard_normal((o,c,3,3))
    y=conv(x,wt,pad); yw=wino_fwd(x,wt,pad)
    dy=rng.standard_normal(y.shape)
    # input grad: forward of dy with flipped/transposed weights, padding 2-pad
    dx_ref=np.zeros_like(x); xp_grad=np.zeros((n,c,h+2*pad,w+2*pad))
    oh,ow=y.shape[2:]
    for i in range(3):
      for j in range(3):
        xp_grad[:,:,i:i+oh,j:j+ow]+=np.einsum('nohw,oc->nchw',dy,wt[:,:,i,j])
    dx_ref=xp_grad[:,:,pad:pad+h,pad:pad+w]
    dxw=wino_fwd(dy,wt,2-pad,flip=True)
    dw_ref=np.zeros_like(wt)
    xpad=np.pad(x,((0,0),(0,0),(pad,pad),(pad,pad)))
    for i in range(3):
      for j in range(3):
        dw_ref[:,:,i,j]=np.einsum('nohw,nchw->oc',dy,xpad[:,:,i:i+oh,j:j+ow])
    dww=wino_wgrad(x,dy,pad)
    print((n,c,o,h,w,pad), abs(y-yw).max(), abs(dx_ref-dxw).max(), dxw.shape==x.shape, abs(dw_ref-dww).max())
    assert max(abs(y - yw).max(), abs(dx_ref - dxw).max(), abs(dw_ref - dww).max()) < 1e-12
print("all transforms match the direct convolution")
