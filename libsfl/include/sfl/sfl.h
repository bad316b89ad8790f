/* libsfl in one include: every public header, layer by layer from the
 * bottom (docs/design.md, section 1; docs/library.md). A program that uses
 * one part may include just that part's headers, sfl/LAYER/NAME.h. */
#ifndef SFL_SFL_H
#define SFL_SFL_H

/* core */
#include <sfl/core/alloc.h>
#include <sfl/core/error.h>
#include <sfl/core/file.h>
#include <sfl/core/cfgkey.h>
#include <sfl/core/ini.h>
#include <sfl/core/log.h>
#include <sfl/core/param.h>
#include <sfl/core/rng.h>
#include <sfl/core/suggest.h>
#include <sfl/core/topk.h>
#include <sfl/core/vec.h>
#include <sfl/core/version.h>

/* data */
#include <sfl/data/csr.h>
#include <sfl/data/csv.h>
#include <sfl/data/dataset.h>
#include <sfl/data/idx.h>
#include <sfl/data/libsvm.h>
#include <sfl/data/partition.h>
#include <sfl/data/synth.h>

/* model */
#include <sfl/model/dict.h>
#include <sfl/model/eval.h>
#include <sfl/model/loss.h>

/* dp */
#include <sfl/dp/dp.h>

/* algo */
#include <sfl/algo/algo.h>
#include <sfl/algo/client.h>
#include <sfl/algo/fold.h>
#include <sfl/algo/vertical.h>

/* crypto */
#include <sfl/crypto/savec.h>
#include <sfl/crypto/seal.h>
#include <sfl/crypto/secagg.h>
#include <sfl/crypto/shamir.h>

/* wire */
#include <sfl/wire/msg.h>
#include <sfl/wire/spcodec.h>
#include <sfl/wire/roundmetrics.h>

/* net */
#include <sfl/net/grpc.h>
#include <sfl/net/grpcconn.h>
#include <sfl/net/grpcframe.h>
#include <sfl/net/transport.h>

#endif
