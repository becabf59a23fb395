//! `#[model]` structs declared in a crate of their own, so the suite can check that a model
//! nests from another crate (tests/nn/macro_modules.rs, tests/ui/*/nested_from_another_crate.rs).

use rumus::prelude::*;

/// Models in a module, re-exported at the crate root.
pub mod vision {
    use rumus::prelude::*;

    /// `[1, 8, 8]` → `[18]` features.
    #[model(input = [1, 8, 8])]
    pub struct Backbone {
        /// One convolution, pooled and flattened.
        pub conv: layers![Conv2d(2, kernel = 3), Relu, MaxPool2d(2), Flatten],
    }
}

pub use vision::Backbone;

/// `[16]` token indices → `[16, 4]`.
#[model(input = [16])]
pub struct TokenEmbedder {
    /// The embedding table.
    pub embed: layers![Embedding(50, 4)],
}

/// ResNet-18 for CIFAR-sized images (He et al., 2016, in the CIFAR form of Kuang Liu's
/// `pytorch-cifar`): a 3×3 stem of 64 channels without max-pool, four stages of two
/// `BasicBlock`s (64, 128, 256, 512 channels; stages 2 to 4 halve the size with a stride-2 first
/// block whose shortcut is a 1×1 convolution and batch norm), global average pooling and a
/// linear layer to 10 classes: 11,173,962 parameters. Its PyTorch twin, with the same
/// `state_dict` names, is `ResNet18` in `tools/bench/torch_bench.py`.
///
/// An identity block is `Residual(conv, bn, relu, conv, bn), Relu` inside a stage's layer list;
/// a downsampling block, whose shortcut is not the identity, is a nested model of its own
/// (`resnet::Down128`, `Down256`, `Down512`).
pub mod resnet {
    use rumus::prelude::*;

    /// The first block of a stage that halves the size and changes the channel count:
    /// `relu(main(x) + shortcut(x))`.
    macro_rules! down_block {
        ($(#[$doc:meta])* $name:ident, [$c:literal, $h:literal], [$out:literal, $oh:literal]) => {
            $(#[$doc])*
            #[model(input = [$c, $h, $h], output = [$out, $oh, $oh], forward = custom)]
            pub struct $name {
                /// conv3×3 stride 2, batch norm, ReLU, conv3×3, batch norm.
                pub main: layers![
                    Conv2d($out, 3, stride = 2, padding = 1, bias = false), BatchNorm2d, Relu,
                    Conv2d($out, 3, padding = 1, bias = false), BatchNorm2d,
                ],
                /// The projection shortcut: conv1×1 stride 2, batch norm.
                #[input = [$c, $h, $h]]
                pub shortcut: layers![Conv2d($out, 1, stride = 2, bias = false), BatchNorm2d],
            }

            impl $name {
                /// `relu(main(x) + shortcut(x))`.
                pub fn forward(
                    &self,
                    x: &Tensor<Shape3<$c, $h, $h>>,
                ) -> rumus::Result<Tensor<Shape3<$out, $oh, $oh>>> {
                    self.forward_main(x)?.add(&self.forward_shortcut(x)?)?.map(|t| t.relu())
                }
            }
        };
    }

    down_block!(
        /// Stage 2's first block: `[64, 32, 32]` → `[128, 16, 16]`.
        Down128, [64, 32], [128, 16]
    );
    down_block!(
        /// Stage 3's first block: `[128, 16, 16]` → `[256, 8, 8]`.
        Down256, [128, 16], [256, 8]
    );
    down_block!(
        /// Stage 4's first block: `[256, 8, 8]` → `[512, 4, 4]`.
        Down512, [256, 8], [512, 4]
    );

    /// ResNet-18 on `[3, 32, 32]` images, 10 classes (see the module's documentation).
    #[model(input = [3, 32, 32])]
    pub struct ResNet18 {
        /// conv3×3 64, batch norm, ReLU.
        pub stem: layers![Conv2d(64, 3, padding = 1, bias = false), BatchNorm2d, Relu],
        /// Two identity blocks of 64 channels at 32×32.
        pub layer1: layers![Repeat(
            2,
            Residual(
                Conv2d(64, 3, padding = 1, bias = false),
                BatchNorm2d,
                Relu,
                Conv2d(64, 3, padding = 1, bias = false),
                BatchNorm2d
            ),
            Relu
        )],
        /// Stage 2's downsampling block.
        pub layer2_0: Down128,
        /// Stage 2's identity block, 128 channels at 16×16.
        pub layer2: layers![
            Residual(
                Conv2d(128, 3, padding = 1, bias = false),
                BatchNorm2d,
                Relu,
                Conv2d(128, 3, padding = 1, bias = false),
                BatchNorm2d
            ),
            Relu
        ],
        /// Stage 3's downsampling block.
        pub layer3_0: Down256,
        /// Stage 3's identity block, 256 channels at 8×8.
        pub layer3: layers![
            Residual(
                Conv2d(256, 3, padding = 1, bias = false),
                BatchNorm2d,
                Relu,
                Conv2d(256, 3, padding = 1, bias = false),
                BatchNorm2d
            ),
            Relu
        ],
        /// Stage 4's downsampling block.
        pub layer4_0: Down512,
        /// Stage 4's identity block, 512 channels at 4×4.
        pub layer4: layers![
            Residual(
                Conv2d(512, 3, padding = 1, bias = false),
                BatchNorm2d,
                Relu,
                Conv2d(512, 3, padding = 1, bias = false),
                BatchNorm2d
            ),
            Relu
        ],
        /// Global average pooling and the classifier.
        pub head: layers![GlobalAvgPool, Linear(10)],
    }
}

pub use resnet::ResNet18;
