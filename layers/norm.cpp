#include "engine/ops/dropout.h"
#include "engine/ops/softmax.h"
#include "layers/norm.h"

#include <sstream>

#include "engine/autograd.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/norm.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"

namespace kiln {

BatchNorm::BatchNorm(int64_t num_features, double eps, std::optional<double> momentum, bool affine,
                     bool track_running_stats)
    : num_features_(num_features), eps_(eps), momentum_(momentum), affine_(affine), track_(track_running_stats) {
  KILN_CHECK(num_features > 0, "BatchNorm: num_features must be positive, got ", num_features);
  if (affine_) {
    register_parameter("weight", ones({num_features}));
    register_parameter("bias", zeros({num_features}));
  }
  if (track_) {
    register_buffer("running_mean", zeros({num_features}));
    register_buffer("running_var", ones({num_features}));
    register_buffer("num_batches_tracked", zeros({}, DType::int64));
  }
}

Tensor BatchNorm::forward(const Tensor& x) {
  const CallScope scope(*this);
  return run(x, false);
}

Tensor BatchNorm::forward_relu(const Tensor& x) { return run(x, true); }

Tensor BatchNorm::run(const Tensor& x, bool relu) {
  KILN_CHECK(x.defined(), kind(), ": undefined input");
  KILN_CHECK(accepts_dim(x.dim()), kind(), ": expected ", expected_dims(), " input, got ", shape_str(x.sizes()));
  KILN_CHECK(x.size(1) == num_features_, kind(), "(", num_features_, "): input ", shape_str(x.sizes()), " has ",
             x.size(1), " channels, expected ", num_features_);
  double momentum = momentum_.value_or(0.0);
  Tensor rm, rv;
  if (track_) {
    rm = buffer("running_mean");
    rv = buffer("running_var");
    if (is_training()) {
      Tensor nbt = buffer("num_batches_tracked");
      const double n = nbt.item() + 1;
      nbt.fill_(n);
      if (!momentum_) momentum = 1.0 / n;  // cumulative moving average
    }
  }
  Tensor w = affine_ ? param("weight") : Tensor();
  Tensor b = affine_ ? param("bias") : Tensor();
  const bool batch_stats = is_training() || !track_;
  if (cross_replica_ && is_training()) return run_synced(x, relu, rm, rv, momentum);
  if (relu) return ops::batch_norm_relu(x, w, b, rm, rv, batch_stats, momentum, eps_);
  return ops::batch_norm(x, w, b, rm, rv, batch_stats, momentum, eps_);
}

// Statistics over every rank: [sum x, sum x^2, count] per channel summed across ranks in one
// call (differentiable: the backward sums the statistics' gradients across ranks too), then the
// normalisation from the global mean and biased variance, in float32 whatever x's dtype. Running
// statistics take the unbiased global variance, as PyTorch's SyncBatchNorm does.
Tensor BatchNorm::run_synced(const Tensor& x, bool relu, const Tensor& rm, const Tensor& rv, double momentum) {
  const int64_t c = num_features_;
  std::vector<int64_t> dims = {0};
  Shape bshape(size_t(x.dim()), 1);
  bshape[1] = c;
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  const Tensor xf = x.dtype() == DType::float32 ? x : x.to(DType::float32);
  const double local_count = double(x.numel() / c);
  // The count lives where the sums do (a CPU tensor beside CUDA sums was found by the emulated device).
  Tensor stats = ops::cat({ops::sum(xf, dims), ops::sum(ops::square(xf), dims),
                           full({1}, local_count, TensorOptions(DType::float32).with_device(x.device()))},
                          0);
  Tensor total = (*cross_replica_)(stats);
  const double n = total.narrow(0, 2 * c, 1).detach().item();
  KILN_CHECK(n > 0, kind(), ": no samples on any rank");
  Tensor mean = ops::mul(total.narrow(0, 0, c), 1.0 / n);
  Tensor var = ops::sub(ops::mul(total.narrow(0, c, c), 1.0 / n), ops::square(mean));
  Tensor y = ops::mul(ops::sub(xf, mean.view(bshape)), ops::rsqrt(ops::add(var, eps_)).view(bshape));
  if (affine_) y = ops::add(ops::mul(y, param("weight").view(bshape)), param("bias").view(bshape));
  if (relu) y = ops::relu(y);
  if (track_) {
    NoGradGuard no_grad;
    const double unbias = n > 1 ? n / (n - 1) : 1.0;
    Tensor(rm).copy_(ops::add(ops::mul(rm, 1 - momentum), ops::mul(mean.detach(), momentum)));
    Tensor(rv).copy_(ops::add(ops::mul(rv, 1 - momentum), ops::mul(var.detach(), momentum * unbias)));
  }
  return y.dtype() == x.dtype() ? y : y.to(x.dtype());
}

Tensor bn_relu(BatchNorm& bn, Module& relu, const Tensor& x) {
  if (!Sequential::fusion()) return relu(bn(x));
  Tensor y = bn.call_as([&] { return bn.forward_relu(x); });
  return relu.call_as([&] { return y; });
}

std::string BatchNorm::repr() const {
  std::ostringstream os;
  os << kind() << "(" << num_features_ << ", eps=" << eps_ << ", momentum=";
  if (momentum_)
    os << *momentum_;
  else
    os << "None";
  os << ", affine=" << (affine_ ? "True" : "False") << ", track_running_stats=" << (track_ ? "True" : "False") << ")";
  return os.str();
}

Dropout::Dropout(double p, Generator* gen) : p_(p), gen_(gen) {
  KILN_CHECK(p >= 0 && p <= 1, "Dropout: probability has to be between 0 and 1, but got ", p);
}

Tensor Dropout::forward(const Tensor& x) {
  const CallScope scope(*this);
  return ops::dropout(x, p_, is_training(), gen_);
}

std::string Dropout::repr() const {
  std::ostringstream os;
  os << "Dropout(p=" << p_ << ")";
  return os.str();
}

Tensor Softmax::forward(const Tensor& x) {
  const CallScope scope(*this);
  return ops::softmax(x, dim_);
}
Tensor LogSoftmax::forward(const Tensor& x) {
  const CallScope scope(*this);
  return ops::log_softmax(x, dim_);
}

}  // namespace kiln
