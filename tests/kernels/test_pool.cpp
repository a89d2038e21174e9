// Pooling and LRN values: hand-computed small cases, numbers produced by PyTorch 1.13 (pasted as
// literals), and bad-argument errors. Every value check runs on both the ref and the native
// backend, in double.
//   ctest --test-dir build -R kernels.test_pool
#include "tests/support/testing.h"

#include <cmath>

#include "engine/ops/elementwise.h"
#include "engine/ops/norm.h"
#include "engine/ops/pool.h"
#include "engine/ops/reduce.h"

using namespace kiln;

namespace {

const char* kBackends[] = {"ref", "native"};

Tensor vec(const std::vector<double>& v, const Shape& s) { return from_vector(v, s, DType::float64); }

Tensor iota(const Shape& s) { return arange(shape_numel(s), DType::float64).reshape(s); }

// x[i] = sin(0.37 i + 0.1) over the flat index: the inputs the PyTorch numbers below were made
// from (torch.tensor([math.sin(0.37*i + 0.1) for i in range(n)], dtype=torch.float64)).
Tensor sin_input(const Shape& s) {
  std::vector<double> v(size_t(shape_numel(s)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37 * double(i) + 0.1);
  return vec(v, s);
}

constexpr double kRtol = 1e-8, kAtol = 1e-9;  // the literals carry 10 significant digits

}  // namespace

TEST_CASE("max_pool2d: hand-computed values and indices") {
  for (const char* be : kBackends) {
    CAPTURE(be);
    BackendGuard g(be);
    auto r = ops::max_pool2d_with_indices(iota({1, 1, 4, 4}), {2, 2});
    CHECK(r.values.sizes() == Shape{1, 1, 2, 2});
    CHECK(r.values.to_vector() == std::vector<double>{5, 7, 13, 15});
    CHECK(r.indices.dtype() == DType::int64);
    CHECK(r.indices.to_vector() == std::vector<double>{5, 7, 13, 15});
    // 5x5, kernel 2, stride 2, pad 1, ceil: the formula gives 4 windows per dim, but the 4th would
    // start in the bottom/right padding, so PyTorch drops it: 3x3 from rows/cols {0}, {1,2}, {3,4}.
    auto c = ops::max_pool2d_with_indices(iota({1, 1, 5, 5}), {2, 2}, {2, 2}, {1, 1}, {1, 1}, true);
    CHECK(c.values.sizes() == Shape{1, 1, 3, 3});
    CHECK(c.values.to_vector() == std::vector<double>{0, 2, 4, 10, 12, 14, 20, 22, 24});
    CHECK(ops::max_pool2d(iota({1, 1, 5, 5}), {2, 2}, {2, 2}, {1, 1}).sizes() == Shape{1, 1, 3, 3});
    // 6 wide, kernel 3, stride 2: floor gives 2 windows, ceil keeps a third, partial one (start 4).
    CHECK(ops::max_pool2d(iota({1, 1, 6, 6}), {3, 3}, {2, 2}).sizes() == Shape{1, 1, 2, 2});
    CHECK(ops::max_pool2d(iota({1, 1, 6, 6}), {3, 3}, {2, 2}, {0, 0}, {1, 1}, true).sizes() == Shape{1, 1, 3, 3});
    // Dilation 2: taps 0 and 2 of each row/col.
    CHECK(ops::max_pool2d(iota({1, 1, 3, 3}), {2, 2}, {1, 1}, {0, 0}, {2, 2}).to_vector() == std::vector<double>{8});
    // 3-d input is a batch of one.
    CHECK(ops::max_pool2d(iota({1, 4, 4}), {2, 2}).sizes() == Shape{1, 2, 2});
    // NaN wins, like PyTorch.
    Tensor n = vec({1, NAN, 3, 2}, {1, 1, 2, 2});
    CHECK(std::isnan(ops::max_pool2d(n, {2, 2}).item()));
  }
}

TEST_CASE("avg_pool2d: hand-computed divisors") {
  for (const char* be : kBackends) {
    CAPTURE(be);
    BackendGuard g(be);
    CHECK(ops::avg_pool2d(iota({1, 1, 3, 3}), {2, 2}, {1, 1}).to_vector() == std::vector<double>{2, 3, 5, 6});
    Tensor x = vec({1, 2, 3, 4}, {1, 1, 2, 2});
    // Each 2x2 window of the 1-padded 2x2 image holds one pixel.
    CHECK(ops::avg_pool2d(x, {2, 2}, {2, 2}, {1, 1}).to_vector() == std::vector<double>{0.25, 0.5, 0.75, 1});
    CHECK(ops::avg_pool2d(x, {2, 2}, {2, 2}, {1, 1}, false, false).to_vector() == std::vector<double>{1, 2, 3, 4});
    CHECK(ops::avg_pool2d(x, {2, 2}, {2, 2}, {1, 1}, false, true, 2).to_vector() ==
          std::vector<double>{0.5, 1, 1.5, 2});
    // 1x3 row, kernel 2 stride 2 ceil: the last window covers column 2 and one column past the
    // (unpadded) border, so it is clipped to the image and divides by 1.
    Tensor row = vec({2, 4, 9}, {1, 1, 1, 3});
    CHECK(ops::avg_pool2d(row, {1, 2}, {1, 2}, {0, 0}, true).to_vector() == std::vector<double>{3, 9});
  }
}

TEST_CASE("pooling matches PyTorch in ceil mode (numbers from torch 1.13)") {
  for (const char* be : kBackends) {
    CAPTURE(be);
    BackendGuard g(be);
    // F.max_pool2d(x[1,2,5,5], 2, 2, 1, ceil_mode=True, return_indices=True)
    auto a = ops::max_pool2d_with_indices(sin_input({1, 2, 5, 5}), {2, 2}, {2, 2}, {1, 1}, {1, 1}, true);
    CHECK_CLOSE(a.values,
                vec({0.09983341665, 0.74464312, 0.9999576465, 0.928959715, 0.732231444, 0.08150215176, 0.9379999768,
                     0.9998717087, 0.7491743483, 0.07470829039, -0.2909522906, -0.8599756921, 0.4649953737,
                     0.9403403914, 0.999739337, 0.7228813495, 0.4240958462, -0.2974653568},
                    {1, 2, 3, 3}),
                kRtol, kAtol);
    CHECK(a.indices.to_vector() == std::vector<double>{0, 2, 4, 5, 6, 8, 20, 21, 19, 0, 1, 3, 10, 12, 13, 15, 16, 18});
    // F.max_pool2d(x[1,1,7,6], (3,2), (2,3), (1,1), (2,1), ceil_mode=True, return_indices=True)
    auto b = ops::max_pool2d_with_indices(sin_input({1, 1, 7, 6}), {3, 2}, {2, 3}, {1, 1}, {2, 1}, true);
    CHECK_CLOSE(b.values,
                vec({0.732231444, 0.9998717087, 0.727573291, 0.732231444, 0.9998717087, 0.727573291, 0.4589514864,
                     0.9998717087, 0.727573291},
                    {1, 1, 3, 3}),
                kRtol, kAtol);
    CHECK(b.indices.to_vector() == std::vector<double>{6, 21, 23, 6, 21, 23, 18, 21, 23});
    // F.avg_pool2d(x[1,1,6,6], 3, 2, 1, ceil_mode=True, count_include_pad=...): the last window
    // runs one column past the padded border.
    Tensor x = sin_input({1, 1, 6, 6});
    CHECK_CLOSE(ops::avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, true, true),
                vec({0.1912611365, 0.2629578809, 0.1235301984, 0.01208029014, 0.04567113129, 0.05611998166,
                     0.01731528214, -0.003715498235, -0.01173229232, 0.01936488922, 0.05723733597, 0.03437413335,
                     -0.3031137018, -0.2798806978, 0.05413482152, 0.1162488434},
                    {1, 1, 4, 4}),
                kRtol, kAtol);
    CHECK_CLOSE(ops::avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, true, false),
                vec({0.4303375571, 0.3944368214, 0.1852952976, 0.03624087042, 0.06850669693, 0.05611998166,
                     0.01731528214, -0.007430996471, -0.01759843849, 0.01936488922, 0.05723733597, 0.0687482667,
                     -0.9093411054, -0.5597613956, 0.108269643, 0.4649953737},
                    {1, 1, 4, 4}),
                kRtol, kAtol);
    // divisor_override=2
    CHECK_CLOSE(ops::avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, true, true, 2),
                vec({0.8606751141, 1.183310464, 0.5558858927, 0.03624087042, 0.2055200908, 0.2525399175,
                     0.07791876963, -0.01114649471, -0.05279531546, 0.08714200148, 0.2575680119, 0.1031224,
                     -0.9093411054, -0.8396420934, 0.1624044646, 0.2324976869},
                    {1, 1, 4, 4}),
                kRtol, kAtol);
  }
}

TEST_CASE("adaptive pooling: hand-computed and PyTorch values") {
  for (const char* be : kBackends) {
    CAPTURE(be);
    BackendGuard g(be);
    // 3 -> 2 windows: [0, 2) and [1, 3).
    CHECK(ops::adaptive_avg_pool2d(iota({1, 1, 3, 3}), {2, 2}).to_vector() == std::vector<double>{2, 3, 5, 6});
    CHECK(ops::adaptive_max_pool2d(iota({1, 1, 3, 3}), {2, 2}).to_vector() == std::vector<double>{4, 5, 7, 8});
    CHECK(ops::adaptive_avg_pool2d(iota({2, 3, 4}), {1, 1}).to_vector() == std::vector<double>{5.5, 17.5});
    // F.adaptive_avg_pool2d / F.adaptive_max_pool2d(x[1,2,5,7], (3,4), return_indices=True)
    Tensor x = sin_input({1, 2, 5, 7});
    CHECK_CLOSE(ops::adaptive_avg_pool2d(x, {3, 4}),
                vec({0.267655234, 0.2197273259, 0.06850328607, -0.07613125507, 0.1682141859, 0.05824482346,
                     -0.1027514071, -0.1977879981, 0.01999691188, -0.120126639, -0.2442117887, -0.2620931448,
                     0.2472779404, 0.1517117586, -0.03036337725, -0.1666441567, 0.09702536834, -0.02690022462,
                     -0.169732869, -0.2276844688, -0.08136116443, -0.1977120842, -0.2598857698, -0.2227042544},
                    {1, 2, 3, 4}),
                kRtol, kAtol);
    auto m = ops::adaptive_max_pool2d_with_indices(x, {3, 4});
    CHECK_CLOSE(m.values,
                vec({0.4528862854, 0.9356160016, 0.9999576465, 0.928959715, 0.9998717087, 0.9264154955, 0.7491743483,
                     0.9379999768, 0.9998717087, 0.9264154955, 0.4302574547, 0.1133850199, 0.7536707851, 0.999739337,
                     0.999739337, 0.7228813495, 0.9211981088, 0.7181558375, 0.9426371368, 0.9995605376,
                     0.9211981088, 0.7181558375, 0.126915561, 0.4770180858},
                    {1, 2, 3, 4}),
                kRtol, kAtol);
    CHECK(m.indices.to_vector() == std::vector<double>{1, 3, 4, 5, 21, 22, 19, 20, 21, 22, 24, 34,
                                                       1, 3, 3, 5, 21, 22, 19, 20, 21, 22, 33, 34});
  }
}

TEST_CASE("local_response_norm: hand-computed and PyTorch values and gradients") {
  for (const char* be : kBackends) {
    CAPTURE(be);
    BackendGuard g(be);
    // size 2, alpha 1, beta 1, k 1 over channels {1, 2, 3}: window [c-1, c], zero padded.
    Tensor h = ops::local_response_norm(vec({1, 2, 3}, {1, 3, 1, 1}), 2, 1.0, 1.0, 1.0);
    CHECK_CLOSE(h, vec({1 / 1.5, 2 / 3.5, 3 / 7.5}, {1, 3, 1, 1}), 1e-14, 0);

    // F.local_response_norm(x[2,7,3,2], size, alpha, beta, k); x.grad of sum(y * w) with
    // w = x.flip(0) * 0.5 + 1.
    std::vector<double> wv(84);
    for (size_t n = 0; n < 2; ++n)
      for (size_t r = 0; r < 42; ++r) wv[n * 42 + r] = std::sin(0.37 * double((1 - n) * 42 + r) + 0.1) * 0.5 + 1.0;
    Tensor w = vec(wv, {2, 7, 3, 2});
    struct Case {
      int64_t size;
      double alpha, beta, k;
      std::vector<double> y, gx;
    };
    std::vector<Case> cases = {
        {3, 0.01, 0.75, 1.0,
         {0.09969732844, 0.4524389533, 0.7436002116, 0.9333854559, 0.9965357919, 0.925269138, 0.7294672221,
          0.4349244275, 0.0812439122, -0.2835003018, -0.6096614292, -0.8530512419, -0.9809690597, -0.9763597199,
          -0.8398359749, -0.5896078542, -0.2593149807, 0.1062733174, 0.4573900063, 0.7463246421, 0.9340901188,
          0.9955668698, 0.9225768087, 0.7248323173, 0.4288061775, 0.07447166807, -0.2900043927, -0.6150134129,
          -0.8565290587, -0.9821076986, -0.9750078353, -0.8361733092, -0.584124487, -0.2527512656, 0.1130249519,
          0.4634103557, 0.7508067588, 0.9366220998, 0.9963955119, 0.9217142864, 0.7219152568, 0.4236763931,
          0.06779182594, -0.2971491959, -0.6218838152, -0.8617966759, -0.984479888, -0.9740462809, -0.8324717956,
          -0.578613892, -0.2461757389, 0.1197713019, 0.4694090789, 0.7552367249, 0.9386985486, 0.9952577494,
          0.917391197, 0.715461535, 0.4165099115, 0.06091705018, -0.3029716211, -0.6256311603, -0.8633651924,
          -0.98424838, -0.9721685526, -0.828731604, -0.5730763242, -0.2395887073, 0.1265120521, 0.4753858969,
          0.7596401742, 0.9409375093, 0.9950340144, 0.9147344842, 0.7107260894, 0.4103324678, 0.05413531016,
          -0.3094341538, -0.6309822051, -0.8667617074, -0.9858220452, -0.9721030426, -0.8267979306, -0.5689255951},
         {1.032283784, 0.8488597357, 0.6855776574, 0.5658547738, 0.5057923869, 0.5123337429, 0.5832419892,
          0.7089323954, 0.8739959648, 1.055819685, 1.229361739, 1.371019044, 1.461946997, 1.490254347, 1.452166632,
          1.352473139, 1.204271803, 1.027625456, 0.8468417756, 0.6867420539, 0.5689071951, 0.5088572307,
          0.5144407451, 0.585091221, 0.7116836473, 0.8772698955, 1.059164634, 1.232322653, 1.373199574, 1.463058802,
          1.490151495, 1.450860494, 1.350133116, 1.201207801, 1.024253976, 0.8436289137, 0.6843636297, 0.5658842158,
          0.5050038322, 0.5106415436, 0.5831623827, 0.7130625674, 1.048434889, 1.223554938, 1.367337721, 1.46001995,
          1.489845796, 1.454062122, 1.358253397, 1.212249362, 1.036672945, 0.8554569958, 0.693551344, 0.5730863988,
          0.5101383856, 0.5127991405, 0.5805706424, 0.704604065, 0.8685215343, 1.050164685, 1.224562161,
          1.367741066, 1.460378708, 1.490356487, 1.453945076, 1.355956305, 1.209219925, 1.033314889, 0.8522219974,
          0.6908873427, 0.5713639291, 0.5095827997, 0.5134749288, 0.5823866681, 0.7073303325, 0.8717912997,
          1.05352136, 1.227543609, 1.37089845, 1.461094828, 1.489508227, 1.452672489, 1.354685824, 1.207732453}},
        {4, 0.1, 0.6, 2.0,
         {0.06559717301, 0.2979106007, 0.4892252087, 0.6128911136, 0.6530182037, 0.6056613934, 0.4776792761,
          0.2850249312, 0.05326478467, -0.1858360654, -0.399371994, -0.5583582206, -0.641697254, -0.6377818318,
          -0.5475068629, -0.3837864521, -0.1687453273, 0.06923357284, 0.298555099, 0.4880068141, 0.611170901,
          0.6508649384, 0.6020421142, 0.4721068791, 0.2790261894, 0.04848159514, -0.1891075058, -0.4018363349,
          -0.5603482535, -0.6424322348, -0.6368767457, -0.5450996628, -0.3802103197, -0.1644755287, 0.07363433579,
          0.3024960947, 0.4909603208, 0.613090053, 0.6526182948, 0.603638544, 0.4724206995, 0.2769650095,
          0.04456989284, -0.1956300585, -0.4093745548, -0.5664312921, -0.6456782877, -0.6377939279, -0.5449309988,
          -0.379065404, -0.1613768572, 0.07852256304, 0.3076024181, 0.4945110343, 0.614183314, 0.6506275485,
          0.598613077, 0.4659768071, 0.2710224891, 0.03965917128, -0.1975778019, -0.4088004023, -0.5648331958,
          -0.6438118746, -0.6349778676, -0.5402101945, -0.3730059488, -0.1559130796, 0.08242622046, 0.310336359,
          0.4967486302, 0.6156463401, 0.6504632973, 0.596857044, 0.4628796682, 0.2670018249, 0.03524480771,
          -0.201799701, -0.4124194541, -0.5671104702, -0.6455626007, -0.6367307615, -0.5412813432, -0.3720918782},
         {0.6802517361, 0.5632477666, 0.4569248935, 0.3772686749, 0.3359984654, 0.3385560353, 0.3834425839,
          0.4645171028, 0.5729071966, 0.6924771061, 0.80591404, 0.8975854167, 0.955230417, 0.9701348324,
          0.9409507215, 0.8738137689, 0.7797120049, 0.6713898362, 0.5613996207, 0.4619404675, 0.3851611675,
          0.3421920787, 0.3407162417, 0.3826341506, 0.4630835068, 0.5710273367, 0.6910553451, 0.8058113093,
          0.8985842086, 0.9559056336, 0.969376902, 0.9425601685, 0.8766597538, 0.7807353352, 0.6677532761,
          0.5529151229, 0.4520182606, 0.3744342443, 0.33248605, 0.333382758, 0.3791400232, 0.4642748458,
          0.6894446264, 0.8049360541, 0.8987540558, 0.9572393668, 0.9732075671, 0.9464934953, 0.8829955334,
          0.787250553, 0.675602763, 0.5630751185, 0.4633192748, 0.387908561, 0.3461925191, 0.3443296576,
          0.3837606018, 0.4606559144, 0.5653513209, 0.6836550415, 0.7989451683, 0.8945157774, 0.9560409009,
          0.9741168444, 0.9462992517, 0.8778124746, 0.7802685615, 0.6686066944, 0.5575966443, 0.4599892039,
          0.3864083785, 0.3457954964, 0.3422938157, 0.385812567, 0.464691954, 0.5692506366, 0.6861186201,
          0.7993797049, 0.8945883519, 0.9518257676, 0.9691645009, 0.9448139637, 0.8812031996, 0.7860142101}},
    };
    for (const Case& c : cases) {
      CAPTURE(c.size);
      Tensor x = sin_input({2, 7, 3, 2}).requires_grad_(true);
      Tensor y = ops::local_response_norm(x, c.size, c.alpha, c.beta, c.k);
      CHECK_CLOSE(y, vec(c.y, {2, 7, 3, 2}), kRtol, kAtol);
      ops::sum(y * w).backward();
      CHECK_CLOSE(x.grad(), vec(c.gx, {2, 7, 3, 2}), kRtol, kAtol);
    }
  }
}

TEST_CASE("pooling errors name the op and shapes") {
  Tensor x = zeros({1, 1, 2, 2});
  CHECK_THROWS_KILN(ops::max_pool2d(x, {3, 3}), "max_pool2d: kernel is larger than the padded input");
  CHECK_THROWS_KILN(ops::max_pool2d(x, {3, 3}), "input [1, 1, 2, 2], kernel [3, 3]");
  CHECK_THROWS_KILN(ops::avg_pool2d(x, {2, 2}, {1, 1}, {2, 1}),
                    "avg_pool2d: padding should be at most half of the kernel size (input [1, 1, 2, 2], kernel "
                    "[2, 2], stride [1, 1], padding [2, 1])");
  CHECK_THROWS_KILN(ops::max_pool2d(zeros({4, 4}), {2, 2}),
                    "max_pool2d: expected a 3-d (C, H, W) or 4-d (N, C, H, W) input, got [4, 4]");
  CHECK_THROWS_KILN(ops::max_pool2d(x, {2, 0}), "max_pool2d: kernel size must be positive");
  CHECK_THROWS_KILN(ops::max_pool2d(x, {1, 1}, {1, 1}, {0, 0}, {0, 1}), "max_pool2d: dilation must be positive");
  CHECK_THROWS_KILN(ops::avg_pool2d(x, {2, 2}, {0, 0}, {0, 0}, false, true, 0),
                    "avg_pool2d: divisor_override must be positive, got 0 (input [1, 1, 2, 2])");
  CHECK_THROWS_KILN(ops::adaptive_avg_pool2d(x, {0, 2}), "adaptive_avg_pool2d: output size [0, 2] must be positive");
  CHECK_THROWS_KILN(ops::adaptive_max_pool2d(zeros({2}), {1, 1}), "adaptive_max_pool2d: expected a 3-d");
  CHECK_THROWS_KILN(ops::local_response_norm(zeros({2, 3}), 2), "local_response_norm: expected an input with at "
                                                                "least 3 dims (N, C, ...), got [2, 3]");
  CHECK_THROWS_KILN(ops::max_pool2d(zeros({1, 1, 2, 2}, DType::int64), {2, 2}),
                    "max_pool2d: needs a floating-point input, got int64 [1, 1, 2, 2]");
}

TEST_CASE("pooling keeps half types and float32 on the native path") {
  Tensor x = iota({1, 1, 4, 4}).to(DType::bfloat16);
  Tensor y = ops::max_pool2d(x, {2, 2});
  CHECK(y.dtype() == DType::bfloat16);
  CHECK(y.to_vector() == std::vector<double>{5, 7, 13, 15});
  CHECK(ops::avg_pool2d(iota({1, 1, 4, 4}).to(DType::float32), {4, 4}).item() == 7.5);
}
