;;;; oracle.lisp - brute-force kNN with the contract's float32 distance, and
;;;; deterministic test clouds.

(in-package #:knn-gpgpu-tests)

(macrolet ((define-sq-distance (name type)
             `(defun ,name (a ai b bi dim)
                ,(format nil "((d0*d0 + d1*d1) + d2*d2) + ... in ~(~A~), d = a - b, each op ~
                              rounded." type)
                (declare (type (simple-array ,type (*)) a b) (type fixnum ai bi dim))
                (let ((acc (coerce 0 ',type)))
                  (declare (type ,type acc))
                  (dotimes (j dim acc)
                    (let* ((d (- (aref a (+ ai j)) (aref b (+ bi j))))
                           (dd (* d d)))
                      (declare (type ,type d dd))
                      (setf acc (if (zerop j) dd (+ acc dd)))))))))
  (define-sq-distance sq-distance single-float)
  (define-sq-distance sq-distance-64 double-float))

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

;;; ---- index helpers ----------------------------------------------------------------

(defun same-bits (a b)
  "Equal lengths and bit-identical single-floats."
  (and (= (length a) (length b))
       (every (lambda (x y) (= (sb-kernel:single-float-bits x) (sb-kernel:single-float-bits y)))
              a b)))

(defun self-oracle (pts dim k exclude-self)
  "(values sq-dists indices) of the all-kNN of PTS in input order; EXCLUDE-SELF
drops only each row's own index."
  (let ((n (floor (length pts) dim)))
    (multiple-value-bind (d i) (oracle pts pts dim n)
      (let ((dists (make-array (* n k) :element-type 'single-float
                                       :initial-element sb-ext:single-float-positive-infinity))
            (inds (make-array (* n k) :element-type '(signed-byte 32) :initial-element -1)))
        (dotimes (row n)
          (let ((j 0))
            (dotimes (c n)
              (let ((idx (aref i (+ (* row n) c))))
                (when (and (< j k) (not (and exclude-self (= idx row))))
                  (setf (aref inds (+ (* row k) j)) idx
                        (aref dists (+ (* row k) j)) (aref d (+ (* row n) c)))
                  (incf j))))))
        (values dists inds)))))

(defun radius-oracle (pts queries dim radius max-neighbors)
  "(values indices sq-dists counts) of a radius search: squared distance <=
radius*radius in single-float, rows of MAX-NEIGHBORS, -1 / +infinity padding."
  (let* ((n (floor (length pts) dim))
         (m (floor (length queries) dim))
         (r (coerce radius 'single-float))
         (r2 (* r r))
         (inds (make-array (* m max-neighbors) :element-type '(signed-byte 32)
                                                :initial-element -1))
         (dists (make-array (* m max-neighbors) :element-type 'single-float
                                                 :initial-element sb-ext:single-float-positive-infinity))
         (counts (make-array m :element-type '(signed-byte 32) :initial-element 0)))
    (multiple-value-bind (d i) (oracle pts queries dim n)
      (dotimes (row m)
        (let ((c (count-if (lambda (x) (<= x r2)) d :start (* row n) :end (* (1+ row) n))))
          (setf (aref counts row) c)
          (dotimes (j (min c max-neighbors))
            (setf (aref inds (+ (* row max-neighbors) j)) (aref i (+ (* row n) j))
                  (aref dists (+ (* row max-neighbors) j)) (aref d (+ (* row n) j)))))))
    (values inds dists counts)))

;;; ---- point in polygon: the header's rule in exact rational arithmetic ------------------
;;; An edge (a, b) counts when exactly one endpoint has y > the point's y and it
;;; crosses the horizontal line strictly right of the point; inside = odd total
;;; over all rings of the polygon (holes included).

(defun exact (x) (rational (coerce x 'single-float)))

(defun ring-crossings (px py ring)
  (let ((v (coerce ring 'vector)) (count 0))
    (dotimes (i (length v) count)
      (destructuring-bind (x1 y1) (mapcar #'exact (aref v i))
        (destructuring-bind (x2 y2) (mapcar #'exact (aref v (mod (1+ i) (length v))))
          (unless (eq (> y1 py) (> y2 py))
            (let ((num (+ (* (- x1 px) (- y2 y1)) (* (- py y1) (- x2 x1)))))
              (when (and (/= num 0) (eq (> num 0) (> y2 y1)))
                (incf count)))))))))

(defun pip-oracle (xy polygons)
  "For XY (flat x y single-floats) and POLYGONS (lists of rings of (x y)),
the list of ascending point indices inside each polygon."
  (let ((n (floor (length xy) 2)))
    (loop for rings in polygons
          collect (loop for i below n
                        for px = (exact (aref xy (* 2 i)))
                        for py = (exact (aref xy (1+ (* 2 i))))
                        when (oddp (loop for ring in rings sum (ring-crossings px py ring)))
                          collect i))))

(defun flat-xy (pairs)
  (let ((v (make-array (* 2 (length pairs)) :element-type 'single-float)))
    (loop for (x y) in pairs for i from 0
          do (setf (aref v (* 2 i)) (coerce x 'single-float)
                   (aref v (1+ (* 2 i))) (coerce y 'single-float)))
    v))

(defun pip-cloud (seed n)
  "N points in [-3, 21) x [-3, 13); the first half snapped to a 0.25 lattice
(many on edges and vertices)."
  (let ((state (sb-ext:seed-random-state seed))
        (v (make-array (* 2 n) :element-type 'single-float)))
    (dotimes (i n v)
      (let ((x (- (random 24f0 state) 3f0))
            (y (- (random 16f0 state) 3f0)))
        (when (< i (floor n 2))
          (setf x (/ (fround (* x 4)) 4) y (/ (fround (* y 4)) 4)))
        (setf (aref v (* 2 i)) x (aref v (1+ (* 2 i))) y)))))
