;;;; oracle.lisp - brute-force kNN with the contract's float32 distance, and
;;;; deterministic test clouds.

(in-package #:knn-gpgpu-tests)

(defun sq-distance (a ai b bi dim)
  "((d0*d0 + d1*d1) + d2*d2) + ... in single-float, d = a - b, each op rounded."
  (declare (type (simple-array single-float (*)) a b) (type fixnum ai bi dim))
  (let ((acc 0f0))
    (declare (type single-float acc))
    (dotimes (j dim acc)
      (let* ((d (- (aref a (+ ai j)) (aref b (+ bi j))))
             (dd (* d d)))
        (declare (type single-float d dd))
        (setf acc (if (zerop j) dd (+ acc dd)))))))

(defun oracle (ref queries dim k)
  "(values sq-dists indices) of the K nearest REF rows for each QUERIES row,
ties by smaller index, -1 / +infinity padding; flat vectors of m*k."
  (let* ((n (floor (length ref) dim))
         (m (floor (length queries) dim))
         (dists (make-array (* m k) :element-type 'single-float
                                    :initial-element sb-ext:single-float-positive-infinity))
         (inds (make-array (* m k) :element-type '(signed-byte 32) :initial-element -1))
         (order (make-array n))
         (d (make-array n :element-type 'single-float)))
    (dotimes (i m)
      (dotimes (r n)
        (setf (aref order r) r
              (aref d r) (sq-distance queries (* i dim) ref (* r dim) dim)))
      (let ((sorted (stable-sort (copy-seq order) #'< :key (lambda (r) (aref d r)))))
        (dotimes (j (min k n))
          (setf (aref inds (+ (* i k) j)) (aref sorted j)
                (aref dists (+ (* i k) j)) (aref d (aref sorted j))))))
    (values dists inds)))

(defun make-cloud (seed n dim &key (kind :uniform))
  "A reproducible flat single-float vector of N rows of DIM. KIND :uniform,
:duplicates (few distinct rows) or :lattice (small integers, many ties)."
  (let ((state (sb-ext:seed-random-state seed))
        (v (make-array (* n dim) :element-type 'single-float)))
    (ecase kind
      (:uniform (dotimes (i (length v)) (setf (aref v i) (- (random 200f0 state) 100f0))))
      (:lattice (dotimes (i (length v)) (setf (aref v i) (float (- (random 7 state) 3) 1f0))))
      (:duplicates
       (let ((base (make-cloud (1+ seed) (max 1 (floor n 8)) dim)))
         (dotimes (i n)
           (let ((b (random (floor (length base) dim) state)))
             (replace v base :start1 (* i dim) :start2 (* b dim) :end2 (* (1+ b) dim)))))))
    v))

(defun nan-single ()
  (sb-kernel:make-single-float #x7fc00000))
